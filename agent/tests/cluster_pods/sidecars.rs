//! Native sidecars (KEP-753): init containers with `restartPolicy: Always` start in order, gate
//! the next init container until their startup probe passes, restart when they exit, and stop
//! once the main containers are done (a Job's pod completes).

use std::time::Duration;

use super::common::*;

/// "proxy" writes /shared/proxy and serves until /shared/stop appears (then exits 1, to be
/// restarted); "setup" copies what it found; "app" prints it.
fn meshed(node: &str) -> String {
    pod_yaml(
        "meshed",
        node,
        &format!(
            "  volumes: [{{name: shared, emptyDir: {{}}}}]
  initContainers:
  - name: proxy
    image: {BUSYBOX}
    restartPolicy: Always
    command: [sh, -c, 'sleep 1; echo proxy up > /shared/proxy; until [ -f /shared/stop ]; do sleep 0.2; done; rm /shared/stop; exit 1']
    startupProbe: {{exec: {{command: [cat, /shared/proxy]}}, periodSeconds: 1}}
    volumeMounts: [{{name: shared, mountPath: /shared}}]
  - name: setup
    image: {BUSYBOX}
    command: [sh, -c, 'cat /shared/proxy > /shared/setup']
    volumeMounts: [{{name: shared, mountPath: /shared}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'cat /shared/setup; sleep 3600']
    volumeMounts: [{{name: shared, mountPath: /shared}}]
"
        ),
    )
}

fn job(node: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: batch}}
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: {node}
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      initContainers:
      - name: logger
        image: {BUSYBOX}
        restartPolicy: Always
        command: [sleep, '3600']
      containers:
      - name: work
        image: {BUSYBOX}
        command: [sh, -c, 'echo done']
"
    )
}

fn init_status(pod: &serde_json::Value, name: &str) -> serde_json::Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name).cloned())
        .unwrap_or_default()
}

#[test]
fn native_sidecars_start_in_order_restart_and_stop_after_the_main_containers() {
    let mut cluster = Cluster::start("agside");
    cluster.start_controller_manager(&[]);
    let node = cluster.node_name.clone();
    cluster.apply(&meshed(&node));
    cluster.apply(&job(&node));

    // setup ran only once the proxy had started: app prints what the proxy wrote.
    cluster.wait_until(Duration::from_secs(90), "app saw the proxy", || {
        let logs = cluster.kubectl(&["logs", "meshed", "-c", "app"]).ok()?;
        (logs == "proxy up\n").then_some(())
    });
    cluster.wait_until(Duration::from_secs(30), "meshed 2/2 Running", || {
        let out = cluster
            .kubectl(&["get", "pod", "meshed", "--no-headers"])
            .ok()?;
        let cols: Vec<&str> = out.split_whitespace().collect();
        (cols.get(1..3) == Some(&["2/2", "Running"][..])).then_some(())
    });
    let pod = cluster.pod("meshed");
    assert_eq!(init_status(&pod, "proxy")["ready"], true, "{pod}");
    assert_eq!(
        init_status(&pod, "setup")["state"]["terminated"]["exitCode"],
        0,
        "{pod}"
    );

    // The sidecar exits: restarted beside the app, which keeps running.
    cluster
        .kubectl(&["exec", "meshed", "-c", "app", "--", "touch", "/shared/stop"])
        .unwrap();
    cluster.wait_until(Duration::from_secs(60), "proxy restarted and ready", || {
        let pod = cluster.pod("meshed");
        let proxy = init_status(&pod, "proxy");
        (proxy["restartCount"].as_i64()? >= 1 && proxy["ready"] == true).then_some(())
    });
    let pod = cluster.pod("meshed");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 0,
        "{pod}"
    );
    assert_eq!(pod["status"]["phase"], "Running", "{pod}");

    // A Job's pod: the work is done, the sidecar is stopped, the pod and the Job complete.
    cluster.wait_until(Duration::from_secs(90), "the Job complete", || {
        let job = cluster.kubectl_json(&["get", "job", "batch"]).ok()?;
        (job["status"]["succeeded"] == 1).then_some(())
    });
    let pods = cluster
        .kubectl_json(&["get", "pods", "-l", "job-name=batch"])
        .unwrap();
    let pod = &pods["items"][0];
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    assert!(
        init_status(pod, "logger")["state"]["terminated"].is_object(),
        "{pod}"
    );
}
