//! Pods that fail: crash loops, probes, image pulls.

use std::time::Duration;

use super::common::*;

#[test]
fn crash_loop_backs_off_and_probes_restart_and_unready() {
    let cluster = Cluster::start("agcrash");
    let node = cluster.node_name.clone();
    cluster.apply(&pod_yaml(
        "crash",
        &node,
        &format!("  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'echo attempt; exit 1']\n"),
    ));
    cluster.apply(&pod_yaml(
        "live",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'touch /tmp/alive; sleep 3; rm /tmp/alive; sleep 3600']\n    livenessProbe:\n      exec: {{command: [cat, /tmp/alive]}}\n      periodSeconds: 1\n      failureThreshold: 2\n"
        ),
    ));
    cluster.apply(&pod_yaml(
        "flap",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'while true; do touch /tmp/ready; sleep 5; rm /tmp/ready; sleep 5; done']\n    readinessProbe:\n      exec: {{command: [cat, /tmp/ready]}}\n      periodSeconds: 1\n      failureThreshold: 1\n"
        ),
    ));

    // All three are watched together from the start: the crash loop's first delays are short.
    let mut ready_seen = Vec::new();
    let mut delays = Vec::new();
    cluster.wait_until(
        Duration::from_secs(90),
        "crash loop, liveness restart and readiness flapping",
        || {
            // Readiness: Ready turns true, then false, then true again.
            let ready = is_ready(&cluster.pod("flap"));
            if ready_seen.last() != Some(&ready) {
                ready_seen.push(ready);
            }
            let flapped = ready_seen.windows(3).any(|w| w == [true, false, true]);
            // Liveness: the container is killed and restarted.
            let live_restarted = container_ids(&cluster.pod("live"))
                .get("app")
                .is_some_and(|c| c.1 >= 1);
            // Crash loop: restarts with a growing back-off, shown as CrashLoopBackOff.
            let pod = cluster.pod("crash");
            let cs = &pod["status"]["containerStatuses"][0];
            if let Some(m) = cs["state"]["waiting"]["message"].as_str() {
                assert_eq!(cs["state"]["waiting"]["reason"], "CrashLoopBackOff");
                let delay = m.split_whitespace().nth(1).unwrap_or("").to_string();
                if delays.last() != Some(&delay) {
                    delays.push(delay);
                }
            }
            let crashed = cs["restartCount"].as_i64() >= Some(3);
            (flapped && live_restarted && crashed).then_some(())
        },
    );
    assert_eq!(
        container_ids(&cluster.pod("flap"))["app"].1,
        0,
        "readiness failures do not restart"
    );
    assert!(
        delays.starts_with(&["10s".to_string(), "20s".to_string()]),
        "back-off delays seen: {delays:?}"
    );
    // Right after a restart the container runs for a moment; then kubectl shows the back-off.
    cluster.wait_until(
        Duration::from_secs(20),
        "kubectl to show CrashLoopBackOff",
        || {
            let table = cluster.kubectl(&["get", "pod", "crash"]).ok()?;
            table.contains("CrashLoopBackOff").then_some(())
        },
    );
    let events = cluster.pod_events("crash");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("BackOff: Back-off restarting failed container app")),
        "{events:?}"
    );
    let events = cluster.pod_events("live");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Unhealthy: Liveness probe failed")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Killing: Container app failed liveness probe")),
        "{events:?}"
    );
    let last = &cluster.pod("crash")["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{last}");
    let previous = cluster
        .kubectl(&["logs", "crash", "--previous"])
        .expect("logs --previous");
    assert_eq!(previous, "attempt\n");
}

#[test]
fn missing_image_gives_err_image_pull_then_back_off() {
    let cluster = Cluster::start("agpull");
    cluster.apply(&pod_yaml(
        "missing",
        &cluster.node_name,
        "  containers:\n  - name: app\n    image: 127.0.0.1:5000/keelson/does-not-exist:1\n",
    ));
    // Watched, because ErrImagePull gives way to ImagePullBackOff within moments (and comes
    // back each time the back-off ends); the watch may begin after the first ErrImagePull, so
    // both reasons are wanted in either order.
    let (mut pulled_failed, mut backed_off) = (false, false);
    let seen = cluster.watch_pod(
        "missing",
        "{.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}",
        Duration::from_secs(120),
        |line| {
            pulled_failed |= line.starts_with("ErrImagePull|");
            backed_off |= line.starts_with("ImagePullBackOff|");
            pulled_failed && backed_off
        },
    );
    let reasons: Vec<&str> = seen
        .iter()
        .filter_map(|(l, _)| l.split('|').next())
        .filter(|r| !r.is_empty())
        .collect();
    let message = seen
        .iter()
        .rev()
        .find(|(l, _)| l.starts_with("ImagePullBackOff|"))
        .and_then(|(l, _)| l.split_once('|'))
        .map(|(_, m)| m.to_string())
        .unwrap_or_default();
    assert!(
        reasons.contains(&"ErrImagePull") && !message.is_empty(),
        "reasons seen: {reasons:?}\n{}",
        tail(&cluster.agent_log(), 20)
    );
    assert!(
        message.contains("does-not-exist") && message.contains("not found"),
        "registry's message kept: {message}"
    );
    assert_eq!(cluster.pod("missing")["status"]["phase"], "Pending");
    let events = cluster.pod_events("missing");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Failed: Failed to pull image") && e.contains("not found")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("BackOff: Back-off pulling image")),
        "{events:?}"
    );
}

#[test]
fn startup_probe_gates_liveness_and_readiness() {
    let cluster = Cluster::start("agstart");
    cluster.apply(&pod_yaml(
        "slow",
        &cluster.node_name,
        &format!(
            r#"  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'sleep 4; touch /tmp/up; sleep 3600']
    startupProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
"#
        ),
    ));
    // Running but not started (and so not ready) while the startup probe fails; the liveness
    // probe, which would fail too, does not run yet.
    cluster.wait_until(Duration::from_secs(30), "running, not yet started", || {
        let pod = cluster.pod("slow");
        let cs = &pod["status"]["containerStatuses"][0];
        (cs["state"]["running"].is_object() && cs["started"] == false && cs["ready"] == false)
            .then_some(())
    });
    cluster.wait_until(Duration::from_secs(30), "started and ready", || {
        let pod = cluster.pod("slow");
        let cs = &pod["status"]["containerStatuses"][0];
        (cs["started"] == true && cs["ready"] == true).then_some(())
    });
    assert_eq!(
        container_ids(&cluster.pod("slow"))["app"].1,
        0,
        "no liveness restart before startup"
    );
}
