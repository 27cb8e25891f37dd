use super::*;
use cri::security_profile::ProfileType;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
        "spec": spec,
    }))
    .unwrap()
}

fn one_container(pod_sc: serde_json::Value, sc: serde_json::Value) -> Pod {
    pod(serde_json::json!({
        "securityContext": pod_sc,
        "containers": [{"name": "app", "image": "app:1", "securityContext": sc}],
    }))
}

fn node() -> NodeSecurity {
    NodeSecurity {
        seccomp_root: "/var/lib/keelson/seccomp/".into(),
        apparmor_enabled: false,
        allowed_unsafe_sysctls: vec!["net.core.somaxconn".into(), "kernel.msg*".into()],
    }
}

fn with_sysctls(names: &[&str], host_network: bool) -> Pod {
    let sysctls: Vec<_> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "value": "1"}))
        .collect();
    pod(serde_json::json!({
        "hostNetwork": host_network,
        "securityContext": {"sysctls": sysctls},
        "containers": [{"name": "app"}],
    }))
}

#[test]
fn safe_and_allowed_sysctls_are_admitted_and_reach_the_sandbox() {
    let p = with_sysctls(
        &[
            "net.ipv4.tcp_syncookies",
            "net/core/somaxconn",
            "kernel.msgmax",
        ],
        false,
    );
    assert_eq!(admit(&node(), &p), Ok(()));
    let set = sysctls(&p);
    assert_eq!(set.get("net.core.somaxconn").map(String::as_str), Some("1"));
    assert!(set.contains_key("kernel.msgmax"));
}

#[test]
fn other_sysctls_reject_the_pod_as_the_kubelet_does() {
    let refused = |names: &[&str], host_network| admit(&node(), &with_sysctls(names, host_network));
    assert_eq!(
        refused(&["net.core.rmem_max"], false),
        Err(Rejection {
            reason: "SysctlForbidden",
            message: "forbidden sysctl: \"net.core.rmem_max\" not allowlisted".into(),
        })
    );
    // Allowed here, but the pod shares the node's network namespace.
    let on_host = refused(&["net.core.somaxconn"], true).unwrap_err();
    assert_eq!(
        on_host.message,
        "forbidden sysctl: \"net.core.somaxconn\" not allowed with host net enabled"
    );
    // Not namespaced at all: never per pod.
    assert!(refused(&["kernel.panic"], false).is_err());
    assert_eq!(
        refused(&["net.ipv4.tcp_syncookies"], true)
            .unwrap_err()
            .reason,
        "SysctlForbidden"
    );
}

#[test]
fn only_namespaced_sysctls_may_be_allowed_on_the_node() {
    let ok =
        |l: &[&str]| check_allowed_unsafe(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(ok(&["net.*", "kernel.shm*", "kernel.sem", "fs.mqueue.*"]).is_ok());
    assert_eq!(
        ok(&["kernel.panic"]),
        Err("the sysctl \"kernel.panic\" is not known to be namespaced".into())
    );
}

#[test]
fn apparmor_is_refused_where_the_kernel_has_none() {
    let confined = one_container(
        serde_json::json!({}),
        serde_json::json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
    );
    let r = admit(&node(), &confined).unwrap_err();
    assert_eq!(r.reason, "AppArmor");
    assert_eq!(
        r.message,
        "Cannot enforce AppArmor: AppArmor is not enabled on the host"
    );
    let mut annotated = one_container(serde_json::json!({}), serde_json::json!({}));
    annotated.metadata.annotations = Some(
        [(
            format!("{APPARMOR_ANNOTATION_PREFIX}app"),
            "localhost/strict".to_string(),
        )]
        .into(),
    );
    assert!(admit(&node(), &annotated).is_err());
    let unconfined = one_container(
        serde_json::json!({"appArmorProfile": {"type": "Unconfined"}}),
        serde_json::json!({}),
    );
    assert_eq!(admit(&node(), &unconfined), Ok(()));
    // Where the kernel has AppArmor, the profile reaches the runtime.
    let with = NodeSecurity {
        apparmor_enabled: true,
        ..node()
    };
    assert_eq!(admit(&with, &annotated), Ok(()));
    let c = &annotated.spec.as_ref().unwrap().containers[0];
    let p = container_apparmor(&with, &annotated, c).unwrap();
    assert_eq!(
        (p.profile_type, p.localhost_ref.as_str()),
        (ProfileType::Localhost as i32, "strict")
    );
}

#[test]
fn seccomp_comes_from_the_container_then_the_pod_and_is_unconfined_by_default() {
    let n = node();
    let plain = one_container(serde_json::json!({}), serde_json::json!({}));
    let c = &plain.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container_seccomp(&n, &plain, c).profile_type,
        ProfileType::Unconfined as i32
    );
    let p = one_container(
        serde_json::json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        serde_json::json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "audit.json"}}),
    );
    let c = &p.spec.as_ref().unwrap().containers[0];
    let own = container_seccomp(&n, &p, c);
    assert_eq!(own.profile_type, ProfileType::Localhost as i32);
    assert_eq!(own.localhost_ref, "/var/lib/keelson/seccomp/audit.json");
    assert_eq!(
        sandbox_seccomp(&n, &p).profile_type,
        ProfileType::RuntimeDefault as i32
    );
}

#[test]
fn proc_is_masked_unless_unmasked() {
    let (masked, readonly) = proc_paths(&SecurityContext::default());
    assert!(masked.contains(&"/proc/kcore".to_string()));
    assert!(readonly.contains(&"/proc/sys".to_string()));
    let unmasked = SecurityContext {
        proc_mount: Some("Unmasked".into()),
        ..Default::default()
    };
    assert_eq!(proc_paths(&unmasked), (vec![], vec![]));
}

#[test]
fn host_namespaces_hold_for_the_containers_too() {
    let p =
        pod(serde_json::json!({"hostPID": true, "hostIPC": true, "containers": [{"name": "a"}]}));
    let ns = namespaces(&p);
    assert_eq!(ns.pid, cri::NamespaceMode::Node as i32);
    assert_eq!(ns.ipc, cri::NamespaceMode::Node as i32);
    assert_eq!(ns.network, cri::NamespaceMode::Pod as i32);
    let shared =
        pod(serde_json::json!({"shareProcessNamespace": true, "containers": [{"name": "a"}]}));
    assert_eq!(namespaces(&shared).pid, cri::NamespaceMode::Pod as i32);
    let plain = pod(serde_json::json!({"containers": [{"name": "a"}]}));
    assert_eq!(namespaces(&plain).pid, cri::NamespaceMode::Container as i32);
}

#[test]
fn run_as_non_root_is_checked_against_the_images_user() {
    let p = one_container(
        serde_json::json!({"runAsNonRoot": true}),
        serde_json::json!({}),
    );
    let c = &p.spec.as_ref().unwrap().containers[0];
    assert!(needs_image_user(&p, c));
    let image = |uid: Option<i64>, name: &str| cri::Image {
        uid: uid.map(|value| cri::Int64Value { value }),
        username: name.into(),
        ..Default::default()
    };
    let who = "(pod: \"web_shop(u1)\", container: app)";
    assert_eq!(
        verify_run_as_non_root(&p, c, Some(&image(None, ""))),
        Err(format!(
            "container has runAsNonRoot and image will run as root {who}"
        ))
    );
    assert!(verify_run_as_non_root(&p, c, Some(&image(Some(0), ""))).is_err());
    assert_eq!(
        verify_run_as_non_root(&p, c, Some(&image(None, "nobody"))),
        Err(format!(
            "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root {who}"
        ))
    );
    assert_eq!(
        verify_run_as_non_root(&p, c, Some(&image(Some(65534), ""))),
        Ok(())
    );
    // A runAsUser in the spec decides without the image.
    let as_root = one_container(
        serde_json::json!({"runAsNonRoot": true}),
        serde_json::json!({"runAsUser": 0}),
    );
    let c = &as_root.spec.as_ref().unwrap().containers[0];
    assert!(!needs_image_user(&as_root, c));
    assert_eq!(
        verify_run_as_non_root(&as_root, c, None),
        Err(format!(
            "container's runAsUser breaks non-root policy {who}"
        ))
    );
}

#[test]
fn an_ephemeral_container_shares_its_targets_processes_unless_the_pod_shares_them_all() {
    let own = pod(serde_json::json!({"containers": [{"name": "app"}]}));
    let ns = container_namespaces(&own, Some("c1"));
    assert_eq!(
        (ns.pid, ns.target_id.as_str()),
        (cri::NamespaceMode::Target as i32, "c1")
    );
    assert_eq!(
        container_namespaces(&own, None).pid,
        cri::NamespaceMode::Container as i32
    );
    let shared =
        pod(serde_json::json!({"shareProcessNamespace": true, "containers": [{"name": "app"}]}));
    let ns = container_namespaces(&shared, Some("c1"));
    assert_eq!(
        (ns.pid, ns.target_id.as_str()),
        (cri::NamespaceMode::Pod as i32, "")
    );
    let host = pod(serde_json::json!({"hostPID": true, "containers": [{"name": "app"}]}));
    assert_eq!(
        container_namespaces(&host, Some("c1")).pid,
        cri::NamespaceMode::Node as i32
    );
}
