//! Image pulls per imagePullPolicy, with ErrImagePull then ImagePullBackOff. The failures are
//! remembered per image between syncs, for the back-off.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use keelson_proto::runtime::v1 as cri;
use kube::api::Api;

use super::pod_key;
use crate::backoff;
use crate::pod::context::Context;
use crate::pod::decide::Waiting;
use crate::pod::events::Kind;

struct PullFailure {
    count: u32,
    at: Instant,
    message: String,
}

/// The image pulls of one pod that failed, by image.
#[derive(Default)]
pub struct ImagePulls {
    failures: HashMap<String, PullFailure>,
}

/// The image one container needs, and what pulling it may use.
pub struct ImageFor<'a> {
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub sandbox: &'a cri::PodSandboxConfig,
}

impl ImagePulls {
    /// The image's reference, present or pulled per imagePullPolicy; a `Waiting` with
    /// ErrImageNeverPull, ErrImagePull or ImagePullBackOff when it cannot be had now.
    pub async fn ensure(&mut self, ctx: &Context, want: &ImageFor<'_>) -> Result<String, Waiting> {
        let image = want.container.image.clone().unwrap_or_default();
        let policy = want
            .container
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| default_pull_policy(&image).to_string());
        if policy != "Always" {
            if let Ok(Some(present)) = ctx.cri.image_status(&image).await {
                let message = format!("Container image \"{image}\" already present on machine");
                event(ctx, want, Kind::Normal, "Pulled", message);
                return Ok(present.id);
            }
            if policy == "Never" {
                return Err(Waiting {
                    reason: "ErrImageNeverPull".into(),
                    message: format!(
                        "Container image \"{image}\" is not present with pull policy of Never"
                    ),
                });
            }
        }
        if let Some(f) = self.failures.get(&image) {
            if f.at.elapsed() < backoff::pull_delay(f.count) {
                return Err(Waiting {
                    reason: "ImagePullBackOff".into(),
                    message: format!("Back-off pulling image \"{image}\": {}", f.message),
                });
            }
        }
        self.pull(ctx, want, image).await
    }

    async fn pull(
        &mut self,
        ctx: &Context,
        want: &ImageFor<'_>,
        image: String,
    ) -> Result<String, Waiting> {
        event(
            ctx,
            want,
            Kind::Normal,
            "Pulling",
            format!("Pulling image \"{image}\""),
        );
        let auth = pull_auth(ctx, want.pod, &image).await;
        let started = Instant::now();
        match ctx
            .cri
            .pull_image(&image, auth, Some(want.sandbox.clone()))
            .await
        {
            Ok(image_ref) => {
                self.failures.remove(&image);
                let message = format!(
                    "Successfully pulled image \"{image}\" in {:.3}s",
                    started.elapsed().as_secs_f64()
                );
                event(ctx, want, Kind::Normal, "Pulled", message);
                Ok(image_ref)
            }
            Err(e) => {
                let message = format!("Failed to pull image \"{image}\": {}", e.status.message());
                tracing::info!(pod = %pod_key(want.pod), %message, "image pull failed");
                event(ctx, want, Kind::Warning, "Failed", message.clone());
                self.record_failure(image, message.clone());
                Err(Waiting {
                    reason: "ErrImagePull".into(),
                    message,
                })
            }
        }
    }

    fn record_failure(&mut self, image: String, message: String) {
        let entry = self.failures.entry(image).or_insert(PullFailure {
            count: 0,
            at: Instant::now(),
            message: String::new(),
        });
        entry.count += 1;
        entry.at = Instant::now();
        entry.message = message;
    }

    /// When the soonest pull back-off ends (None without failures).
    pub fn retry_in(&self) -> Option<Duration> {
        self.failures
            .values()
            .map(|f| backoff::pull_delay(f.count).saturating_sub(f.at.elapsed()))
            .min()
    }
}

fn event(ctx: &Context, want: &ImageFor<'_>, kind: Kind, reason: &str, message: String) {
    ctx.events
        .pod(want.pod, Some(&want.container.name), kind, reason, message);
}

/// Credentials for the image's registry from the pod's imagePullSecrets (missing secrets
/// are skipped: the pull then fails with the registry's own message).
async fn pull_auth(ctx: &Context, pod: &Pod, image: &str) -> Option<cri::AuthConfig> {
    let names: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    if names.is_empty() {
        return None;
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let mut secrets = Vec::new();
    for name in names {
        match keelson_daemon::get_opt(&api, &name).await {
            Ok(Some(s)) => secrets.push(
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
            ),
            Ok(None) => {
                tracing::info!(pod = %pod_key(pod), secret = %name, "imagePullSecret not found")
            }
            Err(e) => {
                tracing::warn!(pod = %pod_key(pod), secret = %name, error = %e, "reading imagePullSecret failed")
            }
        }
    }
    crate::pod::pull_secrets::auth_for(image, &secrets)
}

fn default_pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        "IfNotPresent"
    } else {
        match last.split_once(':') {
            None => "Always",
            Some((_, "latest")) => "Always",
            Some(_) => "IfNotPresent",
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::default_pull_policy;

    #[test]
    fn pull_policy_defaults_like_the_api() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox"),
            "Always"
        );
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox:1.35"),
            "IfNotPresent"
        );
        assert_eq!(default_pull_policy("x@sha256:abc"), "IfNotPresent");
    }
}
