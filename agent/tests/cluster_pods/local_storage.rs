//! Local storage limits as the kubelet's eviction manager holds them: a pod writing past its
//! emptyDir's sizeLimit, or a container past its ephemeral-storage limit, is evicted (Failed,
//! reason Evicted, upstream's message, an Evicted event, a DisruptionTarget condition) and its
//! containers stop; a pod within its limits keeps running.

use std::time::Duration;

use super::common::*;

fn evicted(cluster: &Cluster, name: &str) -> serde_json::Value {
    cluster.wait_until(Duration::from_secs(90), &format!("{name} Evicted"), || {
        let pod = cluster.pod(name);
        (pod["status"]["reason"] == "Evicted").then_some(pod)
    })
}

#[test]
fn pods_past_their_local_storage_limits_are_evicted() {
    let cluster = Cluster::start("aglst");
    let node = cluster.node_name.clone();
    let fill = |path: &str| format!("dd if=/dev/urandom of={path} bs=1024 count=3072; sleep 3600");
    cluster.apply(&pod_yaml(
        "scratchy",
        &node,
        &format!(
            "  volumes: [{{name: scratch, emptyDir: {{sizeLimit: 1Mi}}}}]\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, '{}']\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n",
            fill("/scratch/f")
        ),
    ));
    cluster.apply(&pod_yaml(
        "layered",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, '{}']\n    resources: {{limits: {{ephemeral-storage: 1Mi}}}}\n  - name: idle\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n    resources: {{limits: {{ephemeral-storage: 64Mi}}}}\n",
            fill("/f")
        ),
    ));
    cluster.apply(&pod_yaml(
        "modest",
        &node,
        &format!(
            "  volumes: [{{name: scratch, emptyDir: {{sizeLimit: 8Mi}}}}]\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'dd if=/dev/zero of=/scratch/f bs=1024 count=1024; sleep 3600']\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n"
        ),
    ));

    let pod = evicted(&cluster, "scratchy");
    assert_eq!(pod["status"]["phase"], "Failed", "{pod}");
    assert_eq!(
        pod["status"]["message"],
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ",
        "{pod}"
    );
    let disruption = pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget").cloned())
        .unwrap_or_default();
    assert_eq!(disruption["reason"], "TerminationByKubelet", "{pod}");
    let events = cluster.pod_events("scratchy");
    assert!(
        events
            .iter()
            .any(|e| e.contains("Evicted") && e.contains("EmptyDir volume")),
        "{events:?}"
    );
    let pod = evicted(&cluster, "layered");
    assert_eq!(
        pod["status"]["message"],
        "Container app exceeded its local ephemeral storage limit \"1Mi\". ",
        "{pod}"
    );
    // Its containers stopped: each terminated, none ready (kubectl shows 0/2 and the exit).
    let row = cluster.wait_until(Duration::from_secs(30), "layered 0/2", || {
        let row = cluster
            .kubectl(&["get", "pod", "layered", "--no-headers"])
            .ok()?;
        (row.split_whitespace().nth(1) == Some("0/2")).then_some(row)
    });
    let pod = cluster.pod("layered");
    let exits: Vec<&serde_json::Value> = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["state"]["terminated"]["exitCode"])
        .collect();
    assert!(
        exits.len() == 2 && exits.iter().all(|e| e.is_i64()),
        "{row}\n{pod}"
    );
    assert_eq!(pod["status"]["reason"], "Evicted", "{pod}");

    // The pod within its limit runs on, its container the only one running.
    cluster.wait_until(
        Duration::from_secs(60),
        "the evicted pods' containers stopped",
        || {
            let (_, containers) = cluster.runtime_state();
            let running = containers
                .iter()
                .filter(|c| {
                    c.state == keelson_proto::runtime::v1::ContainerState::ContainerRunning as i32
                })
                .count();
            (running == 1).then_some(())
        },
    );
    let modest = cluster.pod("modest");
    assert_eq!(modest["status"]["phase"], "Running", "{modest}");
    assert!(modest["status"]["reason"].is_null(), "{modest}");
}
