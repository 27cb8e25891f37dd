//! Disk pressure as the kubelet handles it: the node reclaims first (unused images removed, the
//! ones its containers use kept), then evicts pods one at a time, the pod writing most past its
//! request first, with upstream's message; the node reports DiskPressure.

use std::time::Duration;

use super::common::*;

fn evicted(pod: &serde_json::Value) -> bool {
    pod["status"]["reason"] == "Evicted"
}

#[test]
fn disk_pressure_removes_unused_images_then_evicts_the_pod_writing_most() {
    let mut cluster = Cluster::start("agdsk");
    let node = cluster.node_name.clone();
    let body = |command: &str, resources: &str| {
        format!(
            "  volumes: [{{name: scratch, emptyDir: {{}}}}]\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, '{command}']\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n    resources: {resources}\n"
        )
    };
    cluster.apply(&pod_yaml(
        "writer",
        &node,
        &body(
            "dd if=/dev/zero of=/scratch/f bs=1M count=20; sleep 3600",
            "{}",
        ),
    ));
    let within = "{requests: {ephemeral-storage: 100Mi, memory: 16Mi}}";
    cluster.apply(&pod_yaml("bystander", &node, &body("sleep 3600", within)));
    // An image pulled by a pod that is gone: unused on the node.
    cluster.apply(&pod_yaml(
        "once",
        &node,
        &format!("  restartPolicy: Never\n  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    command: [/bin/true]\n"),
    ));
    for name in ["writer", "bystander"] {
        cluster.wait_until(Duration::from_secs(60), &format!("{name} Running"), || {
            (cluster.pod(name)["status"]["phase"] == "Running").then_some(())
        });
    }
    // The kernel's OOM score of each container's process, by QoS class (BestEffort 1000; a
    // Burstable one requesting a sliver of the node's memory 999, just below).
    let oom = |pod: &str| {
        let out = cluster.kubectl(&["exec", pod, "--", "cat", "/proc/1/oom_score_adj"]);
        out.unwrap().trim().to_string()
    };
    assert_eq!(
        (oom("writer"), oom("bystander")),
        ("1000".into(), "999".into())
    );
    cluster.wait_until(Duration::from_secs(60), "once done", || {
        let phase = cluster.pod("once")["status"]["phase"].clone();
        (phase == "Succeeded" || phase == "Failed").then_some(())
    });
    cluster
        .kubectl(&["delete", "pod", "once", "--wait=true"])
        .unwrap();
    // A finished pod goes from the API at once; the agent removes its container after.
    cluster.wait_until(Duration::from_secs(30), "once's container removed", || {
        let (_, containers) = cluster.runtime_state();
        (containers.len() == 2).then_some(())
    });
    let held = cluster.images();
    assert!(held.iter().any(|i| i == HTTP_IMAGE), "{held:?}");

    // The node's disk is now "short" (the thresholds are past what it has free): the running
    // pods were admitted before and stay adopted across the agent's restart.
    cluster.stop_agent("TERM");
    cluster.node_mut(&node).extra_args = [
        "--eviction-hard",
        "nodefs.available<99%,imagefs.available<99%",
        "--minimum-image-ttl-duration",
        "1s",
        "--housekeeping-interval",
        "1s",
    ]
    .map(String::from)
    .to_vec();
    cluster.start_agent();

    let writer = cluster.wait_until(Duration::from_secs(90), "writer Evicted", || {
        let pod = cluster.pod("writer");
        evicted(&pod).then_some(pod)
    });
    let message = writer["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{message}"
    );
    let images = cluster.images();
    assert!(
        !images.iter().any(|i| i == HTTP_IMAGE),
        "the unused image removed: {images:?}\n{}",
        tail(&cluster.agent_log(), 40)
    );
    assert!(
        images.iter().any(|i| i == BUSYBOX),
        "the image in use kept: {images:?}"
    );
    assert!(
        images.iter().any(|i| i.contains("/pause:")),
        "the sandbox image is pinned: {images:?}"
    );
    let log = cluster.agent_log();
    let gc = log.find("image garbage collection removed unused images");
    let first_eviction = log.find("evicting pod");
    assert!(
        gc.is_some() && gc < first_eviction,
        "images reclaimed before any pod was evicted:\n{}",
        tail(&log, 30)
    );
    // The pod within its request goes after the one writing past it.
    let writer_at = log.find("evicting pod pod=writer_default");
    let bystander_at = log.find("evicting pod pod=bystander_default");
    assert!(
        writer_at.is_some() && bystander_at.is_none_or(|b| Some(b) > writer_at),
        "{}",
        tail(&log, 30)
    );
    let n = cluster.kubectl_json(&["get", "node", &node]).unwrap();
    let disk = n["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DiskPressure").cloned())
        .unwrap_or_default();
    assert_eq!(disk["status"], "True", "{disk}");
    assert_eq!(disk["reason"], "KubeletHasDiskPressure", "{disk}");
}
