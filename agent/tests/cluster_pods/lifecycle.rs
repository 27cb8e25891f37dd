//! Lifecycle: init containers and exits, deletion, agent and containerd restarts, log rotation.

use std::time::Duration;

use super::common::*;
use super::{http_pod, ready_pod_ip};

#[test]
fn init_containers_run_in_order_and_exits_are_noticed_within_two_seconds() {
    let cluster = Cluster::start("aginit");
    cluster.apply(&pod_yaml(
        "job",
        &cluster.node_name,
        &format!(
            r#"  restartPolicy: Never
  initContainers:
  - name: first
    image: {BUSYBOX}
    command: [sh, -c, 'echo one > /work/order']
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: second
    image: {BUSYBOX}
    command: [sh, -c, 'echo two >> /work/order']
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: main
    image: {BUSYBOX}
    command: [sh, -c, 'cat /work/order; echo all done > /dev/termination-log; sleep 3']
    volumeMounts: [{{name: work, mountPath: /work}}]
  volumes:
  - name: work
    emptyDir: {{}}
"#
        ),
    ));
    // Watched, so that the moment the status changed is known to the millisecond.
    let phases = cluster.watch_pod("job", "{.status.phase}", Duration::from_secs(120), |p| {
        p == "Succeeded"
    });
    let (_, seen_at) = phases
        .iter()
        .find(|(p, _)| p == "Succeeded")
        .cloned()
        .expect("the pod succeeds");
    let pod = cluster.pod("job");
    let finished = pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        .as_str()
        .expect("finishedAt")
        .to_string();
    let finished: k8s_openapi::jiff::Timestamp = finished.parse().expect("RFC 3339");
    let finished = std::time::UNIX_EPOCH
        + Duration::from_secs(u64::try_from(finished.as_second()).expect("after 1970"));
    // finishedAt is truncated to the second: up to 1 s of the gap is rounding, 2 s is the budget.
    let gap = seen_at.duration_since(finished).unwrap_or_default();
    assert!(
        gap <= Duration::from_millis(3500),
        "exit noticed {gap:?} after finishedAt"
    );
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        terminated["message"], "all done\n",
        "terminationMessagePath read: {terminated}"
    );
    assert_eq!(terminated["reason"], "Completed");
    let inits = pod["status"]["initContainerStatuses"]
        .as_array()
        .expect("init statuses");
    assert_eq!(inits.len(), 2);
    for init in inits {
        assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{init}");
    }
    let conditions = pod["status"]["conditions"].as_array().expect("conditions");
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True"));
    assert_eq!(
        cluster
            .kubectl(&["logs", "job", "-c", "main"])
            .expect("logs"),
        "one\ntwo\n"
    );
    assert_eq!(
        cluster
            .kubectl(&["logs", "job", "-c", "second"])
            .expect("logs"),
        ""
    );
    // The finished pod's sandbox is stopped and its address released; the status keeps it.
    cluster.wait_until(Duration::from_secs(10), "the sandbox to stop", || {
        let (sandboxes, _) = cluster.runtime_state();
        sandboxes.iter().all(|s| s.state != 0).then_some(())
    });
    assert!(
        cluster.allocated_addresses().is_empty(),
        "{:?}",
        cluster.allocated_addresses()
    );
    assert!(cluster.pod("job")["status"]["podIP"]
        .as_str()
        .is_some_and(|ip| ip.starts_with("10.244.7.")));
}

#[test]
fn delete_removes_sandbox_and_address_and_cleans_up_after_downtime() {
    let mut cluster = Cluster::start("agdel");
    let node = cluster.node_name.clone();
    // "first" has a preStop hook that writes into a hostPath directory.
    let host_dir = cluster.tmp.path().join("prestop");
    std::fs::create_dir_all(&host_dir).expect("host dir");
    cluster.apply(&pod_yaml(
        "first",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    readinessProbe:\n      tcpSocket: {{port: 8080}}\n      periodSeconds: 1\n    lifecycle:\n      preStop:\n        exec: {{command: [sh, -c, 'echo bye from $HOSTNAME > /host/prestop']}}\n    volumeMounts: [{{name: host, mountPath: /host}}]\n  volumes:\n  - name: host\n    hostPath: {{path: {}, type: Directory}}\n",
            host_dir.display()
        ),
    ));
    for name in ["second", "third"] {
        cluster.apply(&http_pod(name, &node));
    }
    let ip = ready_pod_ip(&cluster, "first", Duration::from_secs(60));
    ready_pod_ip(&cluster, "second", Duration::from_secs(60));
    ready_pod_ip(&cluster, "third", Duration::from_secs(60));
    assert_eq!(cluster.runtime_state().0.len(), 3);

    // kubectl delete returns once the agent has stopped everything and removed the object.
    let started = std::time::Instant::now();
    cluster
        .kubectl(&["delete", "pod", "first", "--timeout=30s"])
        .expect("kubectl delete");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "delete took {:?}",
        started.elapsed()
    );
    let (sandboxes, containers) = cluster.runtime_state();
    assert_eq!(sandboxes.len(), 2, "first's sandbox removed");
    assert!(containers
        .iter()
        .all(|c| c.labels.get("io.kubernetes.pod.name").map(String::as_str) != Some("first")));
    assert!(
        !cluster.allocated_addresses().contains(&ip),
        "address {ip} released"
    );
    assert!(cluster.kubectl(&["get", "pod", "first"]).is_err());

    // While the agent is down: "second" is deleted gracefully (it waits for the agent), "third"
    // is force-deleted (gone from the API at once).
    cluster.stop_agent("KILL");
    cluster
        .kubectl(&["delete", "pod", "second", "--wait=false"])
        .expect("delete second");
    cluster
        .kubectl(&["delete", "pod", "third", "--grace-period=0", "--force"])
        .expect("delete third");
    assert_eq!(
        cluster.runtime_state().0.len(),
        2,
        "nothing removed while the agent is down"
    );
    cluster.start_agent();
    cluster.wait_until(
        Duration::from_secs(30),
        "both pods removed from containerd and the API",
        || {
            let (sandboxes, _) = cluster.runtime_state();
            (sandboxes.is_empty() && cluster.kubectl(&["get", "pod", "second"]).is_err())
                .then_some(())
        },
    );
    assert!(
        cluster.allocated_addresses().is_empty(),
        "{:?}",
        cluster.allocated_addresses()
    );
}

#[test]
fn a_dead_sandbox_is_replaced_and_the_restart_count_goes_on() {
    // Upstream's kubelet counts restarts across sandboxes: a pod whose sandbox died (or whose
    // node rebooted) runs again in a new one and shows RESTARTS 1, not 0.
    let cluster = Cluster::start("agsbdie");
    let node = cluster.node_name.clone();
    cluster.apply(&http_pod("phoenix", &node));
    ready_pod_ip(&cluster, "phoenix", Duration::from_secs(120));
    let (sandboxes, _) = cluster.runtime_state();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    let old = sandboxes[0].id.clone();
    cluster.stop_sandbox(&old);
    cluster.wait_until(
        Duration::from_secs(60),
        "the pod Ready in a new sandbox with restartCount 1",
        || {
            let pod = cluster.pod("phoenix");
            let (sandboxes, _) = cluster.runtime_state();
            (is_ready(&pod)
                && pod["status"]["containerStatuses"][0]["restartCount"] == 1
                && sandboxes.len() == 1
                && sandboxes[0].id != old)
                .then_some(())
        },
    );
}

#[test]
fn agent_restart_adopts_running_pods_without_restarts() {
    let mut cluster = Cluster::start("agadopt");
    let node = cluster.node_name.clone();
    let names: Vec<String> = (0..10).map(|i| format!("web-{i}")).collect();
    for name in &names {
        cluster.apply(&http_pod(name, &node));
    }
    for name in &names {
        ready_pod_ip(&cluster, name, Duration::from_secs(120));
    }
    let before: Vec<_> = names
        .iter()
        .map(|n| container_ids(&cluster.pod(n)))
        .collect();
    let node_uid =
        cluster.kubectl_json(&["get", "node", &node]).expect("node")["metadata"]["uid"].clone();
    let lease_before = cluster
        .kubectl_json(&["-n", "kube-node-lease", "get", "lease", &node])
        .expect("lease");

    for signal in ["KILL", "TERM"] {
        cluster.stop_agent(signal);
        cluster.start_agent();
        std::thread::sleep(Duration::from_secs(5));
        cluster.wait_until(Duration::from_secs(30), "healthz after restart", || {
            cluster
                .on_node(
                    "curl",
                    &["-sk", "-m", "2", "https://127.0.0.1:10250/healthz"],
                )
                .ok()
        });
        for (name, ids) in names.iter().zip(&before) {
            let pod = cluster.pod(name);
            assert_eq!(
                &container_ids(&pod),
                ids,
                "{name}: same containers, no restarts after {signal}"
            );
            assert!(is_ready(&pod), "{name} stays Ready after {signal}");
        }
        assert_eq!(
            cluster.runtime_state().0.len(),
            10,
            "no new sandboxes after {signal}"
        );
    }
    let node_after = cluster.kubectl_json(&["get", "node", &node]).expect("node");
    assert_eq!(
        node_after["metadata"]["uid"], node_uid,
        "the Node is taken over, not recreated"
    );
    let lease_after = cluster
        .kubectl_json(&["-n", "kube-node-lease", "get", "lease", &node])
        .expect("lease");
    assert_eq!(
        lease_after["metadata"]["uid"], lease_before["metadata"]["uid"],
        "the Lease is taken over"
    );
    assert_ne!(
        lease_after["spec"]["renewTime"], lease_before["spec"]["renewTime"],
        "and renewed"
    );
    assert_eq!(
        cluster
            .kubectl(&["get", "pods", "--no-headers"])
            .expect("get pods")
            .lines()
            .filter(|l| l.contains("1/1"))
            .count(),
        10
    );
}

#[test]
fn containerd_restart_keeps_pods_and_the_agent_recovers() {
    let cluster = Cluster::start("agcrd");
    cluster.apply(&http_pod("before", &cluster.node_name));
    let ip = ready_pod_ip(&cluster, "before", Duration::from_secs(60));
    let ids = container_ids(&cluster.pod("before"));
    cluster.restart_containerd();
    cluster.apply(&http_pod("after", &cluster.node_name));
    ready_pod_ip(&cluster, "after", Duration::from_secs(60));
    assert_eq!(
        container_ids(&cluster.pod("before")),
        ids,
        "the running pod was not restarted"
    );
    let body = cluster
        .on_node("curl", &["-sS", "-m", "5", &format!("http://{ip}:8080/")])
        .expect("HTTP");
    assert_eq!(body, "before\n");
    cluster
        .kubectl(&["delete", "pod", "before", "--timeout=30s"])
        .expect("delete after the restart");
}

#[test]
fn container_logs_are_rotated_and_still_served_in_order() {
    let cluster = Cluster::start("agrot");
    let pad = "x".repeat(100);
    cluster.apply(&pod_yaml(
        "chatty",
        &cluster.node_name,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'i=0; while true; do echo \"line $i {pad}\"; i=$((i+1)); usleep 5000; done']\n"
        ),
    ));
    ready_pod_ip(&cluster, "chatty", Duration::from_secs(60));
    // The agent runs with --container-log-max-size 64Ki --container-log-max-files 3.
    cluster.wait_until(Duration::from_secs(60), "two rotations", || {
        let files = cluster.log_files(&cluster.pod("chatty"), "app");
        (files.len() >= 3).then_some(())
    });
    std::thread::sleep(Duration::from_secs(11));
    let files = cluster.log_files(&cluster.pod("chatty"), "app");
    assert!(files.len() <= 3, "at most 3 files per container: {files:?}");
    let logs = cluster.kubectl(&["logs", "chatty"]).expect("kubectl logs");
    let numbers: Vec<u64> = logs
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(numbers.len() > 500, "{} lines", numbers.len());
    assert!(
        numbers.first() > Some(&0),
        "the oldest lines were rotated away"
    );
    assert!(
        numbers.windows(2).all(|w| w[1] == w[0] + 1),
        "served in order, without gaps"
    );
    let last = cluster
        .kubectl(&["logs", "chatty", "--tail", "1"])
        .expect("tail");
    assert!(last.starts_with("line "), "{last}");
}

#[test]
fn post_start_hooks_run_after_the_start_and_a_failing_one_restarts_the_container() {
    let cluster = Cluster::start("agpost");
    let node = cluster.node_name.clone();
    let hooked = |name: &str, handler: &str| {
        pod_yaml(
            name,
            &node,
            &format!(
                "  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'until [ -f /tmp/started ]; do sleep 0.1; done; echo saw $(cat /tmp/started); sleep 3600']
    lifecycle:
      postStart: {handler}
"
            ),
        )
    };
    cluster.apply(&hooked(
        "hooked",
        "{exec: {command: [sh, -c, 'echo hooked > /tmp/started']}}",
    ));
    cluster.apply(&hooked("failing", "{exec: {command: [sh, -c, 'exit 3']}}"));
    cluster.apply(&hooked("unanswered", "{httpGet: {path: /ready, port: 9}}"));

    // The hook's effect is what the container sees.
    cluster.wait_until(Duration::from_secs(60), "hooked's app saw the hook", || {
        let logs = cluster.kubectl(&["logs", "hooked"]).ok()?;
        (logs == "saw hooked\n").then_some(())
    });
    let pod = cluster.pod("hooked");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 0,
        "{pod}"
    );

    // A failing hook: an event naming it, and the container killed and started again.
    for (name, start) in [
        ("failing", "FailedPostStartHook: Exec lifecycle hook ([\"sh\", \"-c\", \"exit 3\"]) for Container \"app\" in Pod \"failing_default("),
        ("unanswered", "FailedPostStartHook: HTTP lifecycle hook (/ready) for Container \"app\" in Pod \"unanswered_default("),
    ] {
        cluster.wait_until(Duration::from_secs(60), &format!("{name} restarted"), || {
            let pod = cluster.pod(name);
            let restarts = pod["status"]["containerStatuses"][0]["restartCount"].as_i64()?;
            (restarts >= 1).then_some(())
        });
        let events = cluster.pod_events(name);
        assert!(events.iter().any(|e| e.starts_with(start)), "{events:?}");
    }
}
