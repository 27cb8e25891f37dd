//! Pod fields that would reach the host: a subPath through a symlink the pod itself planted in
//! its volume (the API server cannot see that one) must never become a mount of a host path.
//! The real agent, containerd and keelson-apiserver (see common/mod.rs).

mod common;

use std::time::Duration;

use common::*;

/// An init container plants `escape -> /` and `alias -> inside` in an emptyDir; the app
/// container mounts `sub_path` of it at /mnt and lists it.
fn planted_pod(name: &str, node: &str, sub_path: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  volumes: [{{name: scratch, emptyDir: {{}}}}]
  initContainers:
  - name: plant
    image: {BUSYBOX}
    command: [sh, -c, 'mkdir /vol/inside && echo planted > /vol/inside/f && ln -s / /vol/escape && ln -s inside /vol/alias']
    volumeMounts: [{{name: scratch, mountPath: /vol}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'ls /mnt; sleep 3600']
    volumeMounts: [{{name: scratch, mountPath: /mnt, subPath: {sub_path}}}]
"
        ),
    )
}

#[test]
fn a_sub_path_through_a_planted_symlink_fails_the_container_not_the_host() {
    let cluster = Cluster::start("agsubpath");
    let node = cluster.node_name.clone();
    cluster.apply(&planted_pod("escape", &node, "escape"));
    cluster.apply(&planted_pod("alias", &node, "alias"));

    // The symlink to / is refused: the container never starts, and the pod says why.
    let message = cluster.wait_until(
        Duration::from_secs(90),
        "escape's app waiting in CreateContainerConfigError",
        || {
            let pod = cluster.pod("escape");
            let w = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
            (w["reason"] == "CreateContainerConfigError")
                .then(|| w["message"].as_str().unwrap_or("").to_string())
        },
    );
    assert!(
        message.contains("subPath \"escape\" resolves to /, outside the volume"),
        "{message}"
    );
    let events = cluster.pod_events("escape");
    assert!(
        events.iter().any(|e| {
            e.starts_with(
            "Failed: Error: CreateContainerConfigError: container app, volumeMount scratch: subPath"
        )
        }),
        "{events:?}"
    );

    // A symlink that stays inside the volume is followed, as the kubelet does.
    cluster.wait_until(Duration::from_secs(60), "alias Running", || {
        (cluster.pod("alias")["status"]["phase"] == "Running").then_some(())
    });
    cluster.wait_until(Duration::from_secs(30), "alias's app lists f", || {
        let logs = cluster.kubectl(&["logs", "alias", "-c", "app"]).ok()?;
        (logs == "f\n").then_some(())
    });
    let escape = cluster.pod("escape");
    assert_eq!(
        escape["status"]["containerStatuses"][0]["restartCount"], 0,
        "{escape}"
    );
    assert!(
        !cluster.agent_log().contains("panicked"),
        "{}",
        tail(&cluster.agent_log(), 40)
    );
}
