//! Static pods (--pod-manifest-path): a manifest in the directory runs on the node without the
//! API server, and appears in the API as a mirror pod when the API server answers; a manifest
//! removed stops its pod and its mirror; a mirror pod deleted by a user comes back while the
//! static pod runs on, untouched.

use std::time::Duration;

use keelson_proto::runtime::v1 as proto;

use super::common::*;

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{tier: static}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n"
    )
}

/// The id of the running container of the pod named `pod` in the node's runtime.
fn running_container(cluster: &Cluster, pod: &str) -> Option<String> {
    let (sandboxes, containers) = cluster.runtime_state();
    let sandbox = sandboxes
        .iter()
        .find(|s| s.metadata.as_ref().is_some_and(|m| m.name == pod))?;
    containers
        .iter()
        .find(|c| {
            c.pod_sandbox_id == sandbox.id
                && c.state == proto::ContainerState::ContainerRunning as i32
        })
        .map(|c| c.id.clone())
}

#[test]
fn static_pods_run_without_the_api_server_and_are_mirrored_in_it() {
    let mut cluster = Cluster::start("agsta");
    let node = cluster.node_name.clone();
    let dir = cluster.tmp.path().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    cluster.stop_agent("TERM");
    cluster.node_mut(&node).extra_args = [
        "--pod-manifest-path",
        &dir.display().to_string(),
        "--file-check-frequency",
        "1s",
    ]
    .map(String::from)
    .to_vec();
    cluster.start_agent();

    std::fs::write(dir.join("web.yaml"), manifest("web")).unwrap();
    let web = format!("web-{node}");
    let mirror = cluster.wait_until(Duration::from_secs(60), "web's mirror pod Running", || {
        let pod = cluster.pod(&web);
        (pod["status"]["phase"] == "Running").then_some(pod)
    });
    let annotations = &mirror["metadata"]["annotations"];
    assert_eq!(
        annotations["kubernetes.io/config.source"], "file",
        "{mirror}"
    );
    assert!(
        annotations["kubernetes.io/config.mirror"].is_string(),
        "{mirror}"
    );
    assert_eq!(mirror["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(mirror["metadata"]["labels"]["tier"], "static");

    // The API server down: a new manifest still runs.
    cluster.stop_apiserver();
    std::fs::write(dir.join("offline.yaml"), manifest("offline")).unwrap();
    let offline = format!("offline-{node}");
    let first = cluster.wait_until(
        Duration::from_secs(60),
        "offline running in the runtime",
        || running_container(&cluster, &offline),
    );
    cluster.start_apiserver();
    cluster.wait_until(
        Duration::from_secs(60),
        "offline's mirror pod Running",
        || (cluster.pod(&offline)["status"]["phase"] == "Running").then_some(()),
    );

    // A user deleting the mirror pod does not stop the static pod; the mirror comes back.
    cluster
        .kubectl(&["delete", "pod", &offline, "--wait=false"])
        .unwrap();
    cluster.wait_until(Duration::from_secs(60), "offline's mirror pod back", || {
        let pod = cluster.pod(&offline);
        (pod["status"]["phase"] == "Running").then_some(())
    });
    assert_eq!(
        running_container(&cluster, &offline),
        Some(first),
        "the static pod ran on untouched"
    );

    // The manifest removed: the pod stops and its mirror goes.
    std::fs::remove_file(dir.join("web.yaml")).unwrap();
    cluster.wait_until(
        Duration::from_secs(60),
        "web stopped and unmirrored",
        || {
            let gone = cluster.kubectl(&["get", "pod", &web]).is_err();
            (gone && running_container(&cluster, &web).is_none()).then_some(())
        },
    );
    let log = cluster.agent_log();
    assert!(log.contains("mirror pod created"), "{}", tail(&log, 20));
}
