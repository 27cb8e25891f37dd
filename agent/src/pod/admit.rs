//! The node's admission of a pod, before anything of it runs: what it would run weakened is
//! refused out loud (the pod Failed with the reason, an Event naming the field), never run
//! without it. The kubelet's admit handlers (OS, sysctls, AppArmor, in `security`), and the
//! fields this agent does not honour. Pure.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;

use super::security::{self, NodeSecurity, Rejection};

/// The reason of a pod refused for a field this agent does not honour.
pub const UNSUPPORTED: &str = "UnsupportedPodSpec";

pub fn admit(node: &NodeSecurity, pod: &Pod) -> Result<(), Rejection> {
    let os = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    if os.is_some_and(|os| os.name != "linux") {
        return Err(Rejection {
            reason: "PodOSNotSupported",
            message: "Failed to admit pod as the OS field doesn't match node OS".into(),
        });
    }
    if let Some((field, why)) = unsupported(pod) {
        return Err(Rejection {
            reason: UNSUPPORTED,
            message: format!("{field} is not supported by keelson-agent: {why}"),
        });
    }
    security::admit(node, pod)
}

/// An ephemeral container, added after its pod was admitted, passes the same checks of its
/// own fields: refused (the reason as the container's config error) rather than run weakened.
pub fn admit_ephemeral(node: &NodeSecurity, c: &Container) -> Result<(), String> {
    if let Some((f, why)) = container_unsupported(c) {
        let field = format!("spec.ephemeralContainers[{}].{f}", c.name);
        return Err(format!("{field} is not supported by keelson-agent: {why}"));
    }
    if !node.apparmor_enabled && security::container_wants_apparmor(c) {
        return Err("Cannot enforce AppArmor: AppArmor is not enabled on the host".into());
    }
    Ok(())
}

/// Whether the pod has run past its activeDeadlineSeconds (counted from status.startTime, as
/// the kubelet counts it); if not yet, how long until it does.
pub fn active_deadline(pod: &Pod, now: Timestamp) -> (Option<Rejection>, Option<Duration>) {
    let deadline = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let start = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
    let (Some(seconds), Some(start)) = (deadline, start) else {
        return (None, None);
    };
    let ends = start.0.as_second().saturating_add(seconds);
    let left = ends.saturating_sub(now.as_second());
    if left > 0 {
        return (None, Some(Duration::from_secs(left.unsigned_abs())));
    }
    let r = Rejection {
        reason: "DeadlineExceeded",
        message: "Pod was active on the node longer than the specified deadline".into(),
    };
    (Some(r), None)
}

/// The first field of the pod this agent cannot honour, and why.
fn unsupported(pod: &Pod) -> Option<(String, &'static str)> {
    let spec = pod.spec.as_ref()?;
    let pod_level: [(bool, &str, &'static str); 7] = [
        (
            spec.host_users == Some(false),
            "spec.hostUsers",
            "user namespaces need a runtime that supports them (containerd 2)",
        ),
        (
            spec.runtime_class_name.is_some(),
            "spec.runtimeClassName",
            "the node's runtime has one handler",
        ),
        (
            spec.overhead.is_some(),
            "spec.overhead",
            "pod overhead is not added to the pod's cgroup",
        ),
        (
            spec.resources.is_some(),
            "spec.resources",
            "pod-level resources are not applied to the pod's cgroup",
        ),
        (
            spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()),
            "spec.resourceClaims",
            "dynamic resource allocation has no driver here",
        ),
        (
            spec.hostname_override.is_some(),
            "spec.hostnameOverride",
            "the hostname comes from spec.hostname",
        ),
        (
            spec.security_context
                .as_ref()
                .and_then(|s| s.supplemental_groups_policy.as_deref())
                == Some("Strict"),
            "spec.securityContext.supplementalGroupsPolicy",
            "Strict needs a runtime that reports the image's groups",
        ),
    ];
    if let Some((_, field, why)) = pod_level.into_iter().find(|(on, _, _)| *on) {
        return Some((field.to_string(), why));
    }
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ("initContainers", c));
    let main = spec.containers.iter().map(|c| ("containers", c));
    init.chain(main).find_map(|(list, c)| {
        container_unsupported(c).map(|(f, why)| (format!("spec.{list}[{}].{f}", c.name), why))
    })
}

fn container_unsupported(c: &Container) -> Option<(&'static str, &'static str)> {
    let checks: [(bool, &'static str, &'static str); 4] = [
        (
            c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()),
            "volumeDevices",
            "raw block volumes are not attached",
        ),
        (
            c.lifecycle
                .as_ref()
                .is_some_and(|l| l.stop_signal.is_some()),
            "lifecycle.stopSignal",
            "the runtime stops with the image's signal",
        ),
        (
            c.restart_policy_rules
                .as_ref()
                .is_some_and(|r| !r.is_empty()),
            "restartPolicyRules",
            "per-exit-code restart rules are not evaluated",
        ),
        (
            c.env.iter().flatten().any(|e| {
                e.value_from
                    .as_ref()
                    .is_some_and(|v| v.file_key_ref.is_some())
            }),
            "env[].valueFrom.fileKeyRef",
            "variables from files in a volume are not read",
        ),
    ];
    checks
        .into_iter()
        .find(|(on, _, _)| *on)
        .map(|(_, f, why)| (f, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn the_active_deadline_counts_from_the_start_time() {
        let mut p =
            pod(serde_json::json!({"activeDeadlineSeconds": 30, "containers": [{"name": "a"}]}));
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(active_deadline(&p, start), (None, None), "not started yet");
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(start)),
            ..Default::default()
        });
        let at = |s: i64| Timestamp::from_second(start.as_second() + s).unwrap();
        assert_eq!(
            active_deadline(&p, at(10)),
            (None, Some(Duration::from_secs(20)))
        );
        let (ended, _) = active_deadline(&p, at(30));
        assert_eq!(ended.unwrap().reason, "DeadlineExceeded");
    }

    #[test]
    fn fields_the_agent_does_not_honour_refuse_the_pod_and_name_the_field() {
        let node = NodeSecurity::default();
        let r = admit(
            &node,
            &pod(serde_json::json!({"hostUsers": false, "containers": [{"name": "a"}]})),
        )
        .unwrap_err();
        assert_eq!(r.reason, UNSUPPORTED);
        assert!(
            r.message
                .starts_with("spec.hostUsers is not supported by keelson-agent"),
            "{}",
            r.message
        );
        let r = admit(
            &node,
            &pod(serde_json::json!({"containers": [{"name": "a"}, {"name": "b", "volumeDevices": [{"name": "d", "devicePath": "/dev/x"}]}]})),
        )
        .unwrap_err();
        assert!(
            r.message
                .starts_with("spec.containers[b].volumeDevices is not supported"),
            "{}",
            r.message
        );
        let r = admit(
            &node,
            &pod(serde_json::json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]})),
        )
        .unwrap_err();
        assert_eq!(r.reason, "PodOSNotSupported");
        assert_eq!(
            admit(
                &node,
                &pod(serde_json::json!({"os": {"name": "linux"}, "containers": [{"name": "a"}]}))
            ),
            Ok(())
        );
    }

    #[test]
    fn an_ephemeral_container_is_refused_for_what_its_pod_would_be() {
        let c = |v: serde_json::Value| -> Container { serde_json::from_value(v).unwrap() };
        let node = NodeSecurity::default();
        let plain = c(serde_json::json!({"name": "dbg", "image": "busybox"}));
        assert_eq!(admit_ephemeral(&node, &plain), Ok(()));
        let devices = c(
            serde_json::json!({"name": "dbg", "volumeDevices": [{"name": "d", "devicePath": "/dev/x"}]}),
        );
        let err = admit_ephemeral(&node, &devices).unwrap_err();
        assert!(
            err.starts_with("spec.ephemeralContainers[dbg].volumeDevices is not supported"),
            "{err}"
        );
        let confined = c(
            serde_json::json!({"name": "dbg", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}),
        );
        assert!(admit_ephemeral(&node, &confined)
            .unwrap_err()
            .contains("AppArmor"));
    }
}
