//! Disk pressure as the kubelet handles it, on a node whose disk is a small loop-mounted
//! filesystem (images and the agent's root on it) with upstream's default thresholds: a pod
//! filling its emptyDir puts the node under DiskPressure; the node reclaims first (unused images
//! removed, the ones its containers use kept), then evicts the pod writing most past its request
//! with upstream's message; its emptyDir goes with it, and the pressure clears.

use std::time::Duration;

use super::common::*;

/// The kubelet's default hard thresholds.
const UPSTREAM_EVICTION_HARD: &str = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%";

fn evicted(pod: &serde_json::Value) -> bool {
    pod["status"]["reason"] == "Evicted"
}

/// (available, size) in bytes of the filesystem holding `path`, as df reports them.
fn disk(path: &str) -> (u64, u64) {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=avail,size", path])
        .output()
        .expect("df");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut numbers = text
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

fn disk_pressure(cluster: &Cluster, node: &str) -> serde_json::Value {
    let n = cluster.kubectl_json(&["get", "node", node]).unwrap();
    n["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DiskPressure").cloned())
        .unwrap_or_default()
}

#[test]
fn a_full_disk_removes_unused_images_then_evicts_the_pod_writing_most() {
    let flags = [
        ("--eviction-hard", UPSTREAM_EVICTION_HARD),
        ("--image-gc-high-threshold", "85"),
        ("--image-gc-low-threshold", "80"),
        ("--minimum-image-ttl-duration", "1s"),
        ("--housekeeping-interval", "1s"),
        ("--eviction-pressure-transition-period", "5s"),
    ];
    let args: Vec<&str> = flags.iter().flat_map(|(f, v)| [*f, *v]).collect();
    let cluster = Cluster::start_on_small_disk("agdsk", "256M", &args);
    let node = cluster.node_name.clone();
    let root = format!("/var/lib/keelson/containerd/{node}/root");
    let body = |command: &str, resources: &str| {
        format!(
            "  volumes: [{{name: scratch, emptyDir: {{}}}}]\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, '{command}']\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n    resources: {resources}\n"
        )
    };
    // An image pulled by a pod that is gone: unused on the node.
    cluster.apply(&pod_yaml(
        "once",
        &node,
        &format!("  restartPolicy: Never\n  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    command: [/bin/true]\n"),
    ));
    cluster.wait_until(Duration::from_secs(60), "once done", || {
        let phase = cluster.pod("once")["status"]["phase"].clone();
        (phase == "Succeeded" || phase == "Failed").then_some(())
    });
    cluster
        .kubectl(&["delete", "pod", "once", "--wait=true"])
        .unwrap();
    let within = "{requests: {ephemeral-storage: 50Mi, memory: 16Mi}}";
    cluster.apply(&pod_yaml("bystander", &node, &body("sleep 3600", within)));
    cluster.wait_until(Duration::from_secs(60), "bystander Running", || {
        (cluster.pod("bystander")["status"]["phase"] == "Running").then_some(())
    });
    let held = cluster.images();
    assert!(held.iter().any(|i| i == HTTP_IMAGE), "{held:?}");

    // The writer leaves 5% of the disk free: past both thresholds, short of a full disk.
    let (available, size) = disk(&root);
    let fill_mib = available.saturating_sub(size / 20) >> 20;
    assert!(
        fill_mib > 100,
        "the small disk: {available} of {size} bytes free"
    );
    let fill = format!("sleep 5; dd if=/dev/zero of=/scratch/f bs=1M count={fill_mib}; sleep 3600");
    cluster.apply(&pod_yaml("writer", &node, &body(&fill, "{}")));
    cluster.wait_until(Duration::from_secs(60), "writer Running", || {
        (cluster.pod("writer")["status"]["phase"] == "Running").then_some(())
    });
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
    assert!(
        log.contains("evicting pod pod=writer_default"),
        "{}",
        tail(&log, 30)
    );
    let pressure = disk_pressure(&cluster, &node);
    assert_eq!(pressure["status"], "True", "{pressure}");
    assert_eq!(pressure["reason"], "KubeletHasDiskPressure", "{pressure}");

    // The evicted pod's emptyDir is gone with it: the disk is back, the pressure clears, and
    // the pod within its request was never evicted.
    cluster.wait_until(Duration::from_secs(60), "DiskPressure False", || {
        (disk_pressure(&cluster, &node)["status"] == "False").then_some(())
    });
    let (available, _) = disk(&root);
    assert!(available > size / 2, "{available} of {size} bytes free");
    let bystander = cluster.pod("bystander");
    assert_eq!(bystander["status"]["phase"], "Running", "{bystander}");
}
