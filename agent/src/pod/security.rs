//! securityContext as the kubelet hands it to the runtime: seccomp and AppArmor profiles, the
//! /proc paths masked or read-only (procMount), sysctls (the safe set, others only when the node
//! allows them), the pod's namespaces, and runAsNonRoot checked against the image's user. What
//! the node cannot honour rejects the pod (`admit`), as the kubelet's admit handlers do, instead
//! of running it weakened. Pure.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, PodSpec, SecurityContext};
use keelson_proto::runtime::v1 as cri;

/// What the node offers and allows (the kubelet's `--seccomp-profile-root`, whether the kernel
/// has AppArmor, `--allowed-unsafe-sysctls`).
#[derive(Clone, Debug, Default)]
pub struct NodeSecurity {
    /// `Localhost` seccomp profiles are files below it (`<root-dir>/seccomp`, as the kubelet's).
    pub seccomp_root: String,
    pub apparmor_enabled: bool,
    /// Sysctls or `prefix.*` patterns allowed beyond the safe set.
    pub allowed_unsafe_sysctls: Vec<String>,
}

/// Why the node refuses a pod: its status becomes Failed with this reason, and an Event says so.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

/// Sysctls every pod may set (upstream's safe set): namespaced, and isolated from the node.
pub const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The kubelet's masked and read-only /proc and /sys paths for procMount Default.
const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The kubelet's admission of a pod this node would run weakened: sysctls not allowed here,
/// AppArmor asked for on a kernel without it.
pub fn admit(node: &NodeSecurity, pod: &Pod) -> Result<(), Rejection> {
    check_sysctls(node, pod).map_err(|e| Rejection {
        reason: "SysctlForbidden",
        message: format!("forbidden sysctl: {e}"),
    })?;
    if !node.apparmor_enabled && wants_apparmor(pod) {
        return Err(Rejection {
            reason: "AppArmor",
            message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
        });
    }
    Ok(())
}

fn spec_security(pod: &Pod) -> PodSecurityContext {
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default()
}

/// A sysctl's name with `/` separators written as dots, as the runtime expects.
fn normalized(name: &str) -> String {
    if name.contains('/') && !name.contains('.') {
        name.replace('/', ".")
    } else {
        name.to_string()
    }
}

/// Which namespace a sysctl (or a pattern's prefix) lives in, if any (upstream's list): only
/// those may be set per pod.
fn sysctl_namespace(name: &str) -> Option<&'static str> {
    const IPC_PREFIXES: &[&str] = &["kernel.shm", "kernel.msg", "fs.mqueue."];
    if name == "kernel.sem" || IPC_PREFIXES.iter().any(|p| name.starts_with(p)) {
        Some("ipc")
    } else if name.starts_with("net.") {
        Some("net")
    } else {
        None
    }
}

/// The kubelet's check of `--allowed-unsafe-sysctls`: only namespaced sysctls can be per pod.
pub fn check_allowed_unsafe(patterns: &[String]) -> Result<(), String> {
    for p in patterns {
        if sysctl_namespace(p.strip_suffix('*').unwrap_or(p)).is_none() {
            return Err(format!("the sysctl {p:?} is not known to be namespaced"));
        }
    }
    Ok(())
}

fn allowed_unsafe(node: &NodeSecurity, name: &str) -> bool {
    node.allowed_unsafe_sysctls
        .iter()
        .any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => p == name,
        })
}

fn check_sysctls(node: &NodeSecurity, pod: &Pod) -> Result<(), String> {
    let spec = pod.spec.as_ref();
    let on = |flag: fn(&PodSpec) -> Option<bool>| spec.and_then(flag).unwrap_or(false);
    for s in spec_security(pod).sysctls.unwrap_or_default() {
        let name = normalized(&s.name);
        let listed = SAFE_SYSCTLS.contains(&name.as_str()) || allowed_unsafe(node, &name);
        let ns = sysctl_namespace(&name);
        if !listed || ns.is_none() {
            return Err(format!("{:?} not allowlisted", s.name));
        }
        let on_host = match ns {
            Some("net") => on(|s| s.host_network),
            _ => on(|s| s.host_ipc),
        };
        if on_host {
            let ns = ns.unwrap_or_default();
            return Err(format!("{:?} not allowed with host {ns} enabled", s.name));
        }
    }
    Ok(())
}

/// The pod's sysctls for its sandbox (checked by `admit`).
pub fn sysctls(pod: &Pod) -> HashMap<String, String> {
    spec_security(pod)
        .sysctls
        .unwrap_or_default()
        .into_iter()
        .map(|s| (normalized(&s.name), s.value))
        .collect()
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let main = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    init.iter().chain(main)
}

/// Whether the container asks for a confining AppArmor profile.
pub fn container_wants_apparmor(c: &Container) -> bool {
    let sc = c.security_context.as_ref();
    sc.and_then(|s| s.app_armor_profile.as_ref())
        .is_some_and(|p| p.type_ != "Unconfined")
}

fn wants_apparmor(pod: &Pod) -> bool {
    let confined = |t: &str| t != "Unconfined";
    let pod_level = spec_security(pod).app_armor_profile;
    pod_level.is_some_and(|p| confined(&p.type_))
        || all_containers(pod).any(container_wants_apparmor)
        || pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .any(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && v != "unconfined")
}

fn profile(
    type_: cri::security_profile::ProfileType,
    localhost_ref: String,
) -> cri::SecurityProfile {
    cri::SecurityProfile {
        profile_type: type_ as i32,
        localhost_ref,
    }
}

/// A seccomp field as the runtime takes it: Localhost below the node's seccomp root; none set
/// is Unconfined, as the kubelet's default (`seccompDefault: false`).
fn seccomp_profile(
    node: &NodeSecurity,
    field: Option<&k8s_openapi::api::core::v1::SeccompProfile>,
) -> cri::SecurityProfile {
    use cri::security_profile::ProfileType;
    match field.map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())) {
        Some(("RuntimeDefault", _)) => profile(ProfileType::RuntimeDefault, String::new()),
        Some(("Localhost", Some(name))) => {
            let root = node.seccomp_root.trim_end_matches('/');
            profile(ProfileType::Localhost, format!("{root}/{name}"))
        }
        _ => profile(ProfileType::Unconfined, String::new()),
    }
}

/// The sandbox's seccomp profile: the pod's.
pub fn sandbox_seccomp(node: &NodeSecurity, pod: &Pod) -> cri::SecurityProfile {
    seccomp_profile(node, spec_security(pod).seccomp_profile.as_ref())
}

/// The container's seccomp profile: its own, else the pod's.
pub fn container_seccomp(node: &NodeSecurity, pod: &Pod, c: &Container) -> cri::SecurityProfile {
    let own = c
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.clone());
    seccomp_profile(node, own.or(spec_security(pod).seccomp_profile).as_ref())
}

/// The container's AppArmor profile: its field, the pod's, or the beta annotation; none set is
/// the runtime's default where the kernel has AppArmor (`admit` refused the others).
pub fn container_apparmor(
    node: &NodeSecurity,
    pod: &Pod,
    c: &Container,
) -> Option<cri::SecurityProfile> {
    use cri::security_profile::ProfileType;
    if !node.apparmor_enabled {
        return None;
    }
    let own = c
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.clone());
    let field = own.or(spec_security(pod).app_armor_profile);
    let annotation = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{APPARMOR_ANNOTATION_PREFIX}{}", c.name)));
    let (kind, name) = match (&field, annotation) {
        (Some(p), _) => (
            p.type_.as_str(),
            p.localhost_profile.clone().unwrap_or_default(),
        ),
        (None, Some(v)) if v == "runtime/default" => ("RuntimeDefault", String::new()),
        (None, Some(v)) if v == "unconfined" => ("Unconfined", String::new()),
        (None, Some(v)) => (
            "Localhost",
            v.strip_prefix("localhost/").unwrap_or(v).to_string(),
        ),
        (None, None) => return None,
    };
    Some(match kind {
        "Localhost" => profile(ProfileType::Localhost, name),
        "Unconfined" => profile(ProfileType::Unconfined, String::new()),
        _ => profile(ProfileType::RuntimeDefault, String::new()),
    })
}

/// Masked and read-only /proc paths: the kubelet's defaults, none for procMount Unmasked.
pub fn proc_paths(sc: &SecurityContext) -> (Vec<String>, Vec<String>) {
    if sc.proc_mount.as_deref() == Some("Unmasked") {
        return (Vec::new(), Vec::new());
    }
    let owned = |l: &[&str]| l.iter().map(|p| p.to_string()).collect();
    (owned(MASKED_PATHS), owned(READONLY_PATHS))
}

/// The pod's namespaces, for its sandbox and each of its containers alike.
pub fn namespaces(pod: &Pod) -> cri::NamespaceOption {
    use cri::NamespaceMode;
    let spec = pod.spec.as_ref();
    let mode = |on_node: fn(&PodSpec) -> Option<bool>, shared: NamespaceMode| {
        if spec.and_then(on_node).unwrap_or(false) {
            NamespaceMode::Node
        } else {
            shared
        }
    } as i32;
    let pid_shared = if spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false)
    {
        NamespaceMode::Pod
    } else {
        NamespaceMode::Container
    };
    cri::NamespaceOption {
        network: mode(|s| s.host_network, NamespaceMode::Pod),
        pid: mode(|s| s.host_pid, pid_shared),
        ipc: mode(|s| s.host_ipc, NamespaceMode::Pod),
        ..Default::default()
    }
}

/// A container's namespaces: the pod's, and for an ephemeral container with a target, the
/// target's process namespace where the pod shares none (the kubelet's NamespaceMode TARGET).
pub fn container_namespaces(pod: &Pod, target_id: Option<&str>) -> cri::NamespaceOption {
    let mut ns = namespaces(pod);
    if let Some(target) = target_id {
        if ns.pid == cri::NamespaceMode::Container as i32 {
            ns.pid = cri::NamespaceMode::Target as i32;
            ns.target_id = target.to_string();
        }
    }
    ns
}

/// The user a container runs as, by its security context or the pod's.
pub fn run_as_user(pod: &Pod, c: &Container) -> Option<i64> {
    let own = c.security_context.as_ref().and_then(|s| s.run_as_user);
    own.or(spec_security(pod).run_as_user)
}

/// Whether the runAsNonRoot check needs the image's user (the spec sets no runAsUser).
pub fn needs_image_user(pod: &Pod, c: &Container) -> bool {
    run_as_non_root(pod, c) && run_as_user(pod, c).is_none()
}

fn run_as_non_root(pod: &Pod, c: &Container) -> bool {
    let own = c.security_context.as_ref().and_then(|s| s.run_as_non_root);
    own.or(spec_security(pod).run_as_non_root).unwrap_or(false)
}

/// The kubelet's runAsNonRoot check, against the image's user where the spec sets none: an
/// image with no user runs as root; a user name cannot be verified.
pub fn verify_run_as_non_root(
    pod: &Pod,
    c: &Container,
    image: Option<&cri::Image>,
) -> Result<(), String> {
    if !run_as_non_root(pod, c) {
        return Ok(());
    }
    let who = format!("pod: \"{}\", container: {}", super::format_pod(pod), c.name);
    if let Some(uid) = run_as_user(pod, c) {
        return match uid {
            0 => Err(format!(
                "container's runAsUser breaks non-root policy ({who})"
            )),
            _ => Ok(()),
        };
    }
    let uid = image.and_then(|i| i.uid.as_ref()).map(|u| u.value);
    let username = image.map(|i| i.username.as_str()).unwrap_or_default();
    match (uid, username) {
        (Some(0), _) | (None, "") => Err(format!(
            "container has runAsNonRoot and image will run as root ({who})"
        )),
        (None, name) => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root ({who})"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "security_tests.rs"]
mod tests;
