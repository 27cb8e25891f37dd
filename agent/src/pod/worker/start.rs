//! Starting one attempt of a container: its image (pulled per policy), its config (env, volumes,
//! the termination-log mount), then CreateContainer and StartContainer with their events. Every
//! failure is a `Waiting` the pod's status shows (ErrImagePull, CreateContainerConfigError, ...).

use k8s_openapi::api::core::v1::{Container, Pod};
use keelson_proto::runtime::v1 as cri;

use super::hooks;
use super::phases::{Phase, StartClock};
use super::pull::{ImageFor, ImagePulls};
use super::sources;
use super::stop;
use crate::pod::context::Context;
use crate::pod::decide::{ContainerKind, Waiting};
use crate::pod::events::Kind;
use crate::pod::observed::ObservedSandbox;
use crate::pod::{env, etc_hosts, security, service_env, translate, volumes};

/// One attempt of a container, to run in the pod's current sandbox.
pub struct ContainerToStart<'a> {
    pub pod: &'a Pod,
    pub sandbox: &'a ObservedSandbox,
    pub container: &'a Container,
    pub kind: ContainerKind,
    /// The running container an ephemeral one targets (shares its process namespace).
    pub target_id: Option<&'a str>,
    pub attempt: u32,
}

/// Creates and starts the container; the `Waiting` says why it could not.
pub async fn container(
    ctx: &Context,
    pulls: &mut ImagePulls,
    start: &ContainerToStart<'_>,
    clock: &mut StartClock,
) -> Result<(), Waiting> {
    let sandbox_config = translate::sandbox_config(&ctx.settings, start.pod, start.sandbox.attempt);
    let want = ImageFor {
        pod: start.pod,
        container: start.container,
        sandbox: &sandbox_config,
    };
    let image_ref = clock.time(Phase::Pull, pulls.ensure(ctx, &want)).await?;
    check_user(ctx, start, &image_ref).await?;
    let config = clock
        .time(Phase::Config, container_config(ctx, start, &image_ref))
        .await?;
    check_seccomp(&config)?;
    create_and_start(ctx, start, config, sandbox_config, clock).await
}

/// runAsNonRoot against the user the container would run as (the image's, where the spec sets
/// none), as the kubelet checks it before creating the container.
async fn check_user(
    ctx: &Context,
    start: &ContainerToStart<'_>,
    image_ref: &str,
) -> Result<(), Waiting> {
    let (pod, c) = (start.pod, start.container);
    let image = match security::needs_image_user(pod, c) {
        true => ctx.cri.image_status(image_ref).await.ok().flatten(),
        false => None,
    };
    security::verify_run_as_non_root(pod, c, image.as_ref()).map_err(config_error)
}

/// A Localhost seccomp profile the node does not have: refused before the runtime is asked.
fn check_seccomp(config: &cri::ContainerConfig) -> Result<(), Waiting> {
    let profile = config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|s| s.seccomp.as_ref())
        .filter(|p| p.profile_type == cri::security_profile::ProfileType::Localhost as i32);
    match profile {
        Some(p) if !std::path::Path::new(&p.localhost_ref).is_file() => Err(config_error(format!(
            "seccomp profile {:?} (securityContext.seccompProfile.localhostProfile) is not on this node",
            p.localhost_ref
        ))),
        _ => Ok(()),
    }
}

fn config_error(message: String) -> Waiting {
    Waiting {
        reason: "CreateContainerConfigError".into(),
        message,
    }
}

/// The CRI config: env resolved from the API objects, volumes prepared on the node, mounts.
async fn container_config(
    ctx: &Context,
    start: &ContainerToStart<'_>,
    image_ref: &str,
) -> Result<cri::ContainerConfig, Waiting> {
    let (pod, container) = (start.pod, start.container);
    let (env_sources, mut objects) = sources::fetch(&ctx.client, pod, container)
        .await
        .map_err(|e| config_error(e.to_string()))?;
    objects.tokens = super::token_refresh::fetch(ctx, pod)
        .await
        .map_err(config_error)?;
    objects.claims = crate::pod::claims::resolve(&ctx.client, pod)
        .await
        .map_err(|e| config_error(e.to_string()))?;
    let paths =
        volumes::prepare(&ctx.root, pod, &objects).map_err(|e| config_error(e.to_string()))?;
    let mut mounts =
        volumes::mounts_for(pod, container, &paths).map_err(|e| config_error(e.to_string()))?;
    let termination = volumes::termination_mount(&ctx.root, pod, container, start.attempt)
        .map_err(|e| config_error(format!("termination log: {e}")))?;
    mounts.push(termination);
    let pod_ip = start.sandbox.ip.as_deref().unwrap_or("");
    let domain = &ctx.settings.cluster_domain;
    let hosts = etc_hosts::mount(&ctx.root, pod, container, pod_ip, domain)
        .map_err(|e| config_error(format!("/etc/hosts: {e}")))?;
    mounts.extend(hosts);
    let env = env::resolve(pod, container, pod_ip, &ctx.host_ip, &env_sources)
        .map_err(|e| config_error(e.to_string()))?;
    let env = service_env::merge(ctx.service_links.env(pod).await, env);
    Ok(translate::container_config(&translate::ContainerInput {
        pod,
        container,
        kind: start.kind,
        target_id: start.target_id,
        attempt: start.attempt,
        image_ref,
        env: &env,
        mounts: &mounts,
        node_name: &ctx.settings.node_name,
        node: &ctx.settings.security,
        memory_capacity: crate::node::machine::memory_bytes(),
    }))
}

async fn create_and_start(
    ctx: &Context,
    start: &ContainerToStart<'_>,
    config: cri::ContainerConfig,
    sandbox_config: cri::PodSandboxConfig,
    clock: &mut StartClock,
) -> Result<(), Waiting> {
    let (pod, name) = (start.pod, &start.container.name);
    let creating = ctx
        .cri
        .create_container(&start.sandbox.id, config, sandbox_config);
    let id = clock
        .time(Phase::Create, creating)
        .await
        .map_err(|e| Waiting {
            reason: "CreateContainerError".into(),
            message: e.status.message().to_string(),
        })?;
    let created = format!("Created container {name}");
    ctx.events
        .pod(pod, Some(name), Kind::Normal, "Created", created);
    let starting = ctx.cri.start_container(&id);
    if let Err(e) = clock.time(Phase::Start, starting).await {
        // Its sandbox died under it: it never ran there and is removed, so that it counts as
        // no attempt in the pod's next sandbox. Any other failure stays, counted as upstream
        // counts a StartError (restarts, back-off).
        let sandbox = ctx.cri.pod_sandbox_status(&start.sandbox.id).await;
        let dead = sandbox.is_ok_and(|s| s.state != cri::PodSandboxState::SandboxReady as i32);
        if dead {
            if let Err(rm) = ctx.cri.remove_container(&id).await {
                tracing::debug!(container = %id, error = %rm, "removing a container that never started failed");
            }
        }
        return Err(Waiting {
            reason: "RunContainerError".into(),
            message: e.status.message().to_string(),
        });
    }
    let started = format!("Started container {name}");
    ctx.events
        .pod(pod, Some(name), Kind::Normal, "Started", started);
    post_start(ctx, start, &id).await;
    Ok(())
}

/// The postStart hook, run as the kubelet runs it: the start waits for it; when it fails, a
/// FailedPostStartHook event and the container is stopped (preStop included), to be restarted
/// per the pod's restartPolicy.
async fn post_start(ctx: &Context, start: &ContainerToStart<'_>, id: &str) {
    let c = start.container;
    let Some(handler) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
        return;
    };
    let pod_ip = start.sandbox.ip.as_deref().unwrap_or("");
    let target = hooks::Target {
        id,
        pod_ip,
        exec_timeout: 0,
    };
    let Err(why) = hooks::run(ctx.cri.as_ref(), handler, c, &target).await else {
        return;
    };
    let pod = crate::pod::format_pod(start.pod);
    let message = match (&handler.exec, &handler.http_get) {
        (Some(exec), _) => format!(
            "Exec lifecycle hook ({:?}) for Container {:?} in Pod {pod:?} failed - error: {why}",
            exec.command.clone().unwrap_or_default(),
            c.name
        ),
        (None, Some(http)) => format!(
            "HTTP lifecycle hook ({}) for Container {:?} in Pod {pod:?} failed - error: {why}",
            http.path.as_deref().unwrap_or_default(),
            c.name
        ),
        _ => format!("PostStartHook for Container {:?} failed: {why}", c.name),
    };
    tracing::warn!(pod = %pod, container = %c.name, "{message}");
    ctx.events.pod(
        start.pod,
        Some(&c.name),
        Kind::Warning,
        "FailedPostStartHook",
        message,
    );
    let stop = stop::Stop {
        spec: Some(c),
        id,
        pod_ip,
        grace: stop::grace_seconds(start.pod),
        report: Some((&ctx.events, start.pod)),
    };
    if let Err(e) = stop::container(ctx.cri.as_ref(), stop).await {
        tracing::warn!(container = %c.name, error = %e, "stopping after a failed postStart hook failed");
    }
}
