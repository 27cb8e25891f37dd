//! `kubectl debug`: an ephemeral container added to a running pod through
//! pods/ephemeralcontainers, started by the agent in the pod's sandbox (in its target's process
//! namespace) and attached to; and `kubectl debug node/NAME`, a pod in the node's namespaces
//! with its root filesystem at /host.

use std::process::{Output, Stdio};
use std::time::Duration;

use super::common::*;

/// kubectl with `input` on its stdin (not a terminal: kubectl says so and goes on without one).
/// Its stdin stays open until kubectl ends (the shell exits): a closed stdin would end the
/// session before the shell's answers come back.
fn kubectl_with_input(cluster: &Cluster, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = cluster
        .kubectl_cmd()
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_string();
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        // A moment for the attach to be in place before the commands go.
        std::thread::sleep(Duration::from_secs(1));
        let _ = stdin.write_all(input.as_bytes());
        let _ = ended.recv_timeout(Duration::from_secs(120));
    });
    let out = child.wait_with_output().expect("wait for kubectl");
    drop(done);
    let _ = writer.join();
    out
}

fn ephemeral_status(pod: &serde_json::Value, name: &str) -> serde_json::Value {
    pod["status"]["ephemeralContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name).cloned())
        .unwrap_or_default()
}

#[test]
fn kubectl_debug_runs_an_ephemeral_container_beside_its_target_and_on_the_node() {
    let cluster = Cluster::start("agdbg");
    let node = cluster.node_name.clone();
    cluster.apply(&pod_yaml(
        "shop",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'exec sleep 3601']\n"
        ),
    ));
    cluster.wait_until(Duration::from_secs(60), "shop Running", || {
        (cluster.pod("shop")["status"]["phase"] == "Running").then_some(())
    });

    // `kubectl debug -it` as a user types it; its shell sees the target's processes.
    let out = kubectl_with_input(
        &cluster,
        &[
            "debug",
            "-it",
            "shop",
            "--image",
            BUSYBOX,
            "--target=app",
            "-c",
            "dbg",
            "--",
            "sh",
        ],
        "echo marker-$((40+2)); ps -o pid,args; exit 7\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("marker-42") && stdout.contains("sleep 3601"),
        "the debug shell ran in the target's process namespace:\n{stdout}\n{stderr}\n{}",
        tail(&cluster.agent_log(), 30)
    );
    // The ephemeral container ran once and stays exited: never restarted.
    let pod = cluster.wait_until(Duration::from_secs(30), "dbg terminated", || {
        let pod = cluster.pod("shop");
        ephemeral_status(&pod, "dbg")["state"]["terminated"]
            .is_object()
            .then_some(pod)
    });
    let dbg = ephemeral_status(&pod, "dbg");
    assert_eq!(dbg["state"]["terminated"]["exitCode"], 7, "{pod}");
    assert_eq!(dbg["restartCount"], 0, "{pod}");
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["targetContainerName"], "app",
        "{pod}"
    );
    std::thread::sleep(Duration::from_secs(3));
    let (_, containers) = cluster.runtime_state();
    let runs = containers
        .iter()
        .filter(|c| c.metadata.as_ref().is_some_and(|m| m.name == "dbg"))
        .count();
    assert_eq!(
        runs, 1,
        "one run of the ephemeral container: {containers:?}"
    );
    assert_eq!(cluster.pod("shop")["status"]["phase"], "Running");
    let logs = cluster.kubectl(&["logs", "shop", "-c", "dbg"]).unwrap();
    assert!(logs.contains("marker-42"), "{logs}");

    // `kubectl debug node/NAME`: the node's network and processes, its root at /host.
    let out = kubectl_with_input(
        &cluster,
        &[
            "debug",
            &format!("node/{node}"),
            "-i",
            "--image",
            BUSYBOX,
            "--",
            "sh",
        ],
        // The pause before exit: an attached process's last output may be cut when it exits
        // at once (containerd's attach, as upstream's `kubectl attach`), and ps is slow under load.
        "cat /host/etc/hostname; ip -o -4 addr; echo agents=$(ps -o args | grep -c '[k]eelson-agent'); sleep 1; exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let host_name = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    assert!(
        stdout.contains(host_name.trim()) && stdout.contains(NODE_IP),
        "the node's root at /host and its addresses:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agents = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("agents="))
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        agents.is_some_and(|n| n >= 1),
        "the node's agent process is visible (hostPID):\n{stdout}"
    );
}
