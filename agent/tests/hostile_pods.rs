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

/// limitBytes comes from the request and may end inside a multi-byte character: the answer
/// stops before that character, and the agent keeps serving (a cut inside it used to panic).
#[test]
fn a_log_byte_limit_inside_a_character_is_cut_before_it() {
    let cluster = Cluster::start("aglimit");
    let node = cluster.node_name.clone();
    cluster.apply(&pod_yaml(
        "accent",
        &node,
        &format!(
            r#"  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, "printf 'a\\303\\251\\n'; sleep 3600"]
"#
        ),
    ));
    cluster.wait_until(Duration::from_secs(60), "accent's log", || {
        let logs = cluster.kubectl(&["logs", "accent"]).ok()?;
        (logs == "aé\n").then_some(())
    });
    let limited = |bytes: &str| cluster.kubectl(&["logs", "accent", "--limit-bytes", bytes]);
    assert_eq!(limited("2"), Ok("a".to_string()));
    assert_eq!(limited("3"), Ok("aé".to_string()));
    assert_eq!(limited("9223372036854775807"), Ok("aé\n".to_string()));
    // The container name comes from the URL: one that is not the pod's never becomes a path,
    // even one that leads back to a real log ("../<this pod's folder>/app").
    let uid = cluster.kubectl(&["get", "pod", "accent", "-o", "jsonpath={.metadata.uid}"]);
    let uid = uid.expect("the pod's uid");
    let path = format!("/containerLogs/default/accent/..%2Fdefault_accent_{uid}%2Fapp");
    // By a user allowed to read logs: the name is judged after authorization, as the kubelet.
    let answer = cluster.agent_get(&path, Some(&cluster.admin_token()));
    assert!(answer.ends_with(" 400"), "{answer}");
    assert!(answer.contains("invalid container name"), "{answer}");
    assert!(
        !cluster.agent_log().contains("panicked"),
        "{}",
        tail(&cluster.agent_log(), 40)
    );
}
