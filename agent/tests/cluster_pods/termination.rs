//! Termination: preStop hooks run before SIGTERM within the grace period, and the pod keeps its
//! address and answers on it until its containers have stopped.

use std::time::{Duration, Instant};

use super::common::*;
use super::ready_pod_ip;

/// "web" serves HTTP with a 3 s preStop sleep; "drain" has an exec preStop. Both note the hook
/// and the SIGTERM, in the order they came, in a hostPath file.
fn graceful_pod(node: &str, host_dir: &std::path::Path) -> String {
    let body = format!(
        r#"  containers:
  - name: web
    image: {HTTP_IMAGE}
    command: [sh, -c, 'trap "echo term >> /host/web; exit 0" TERM; podname-http & wait']
    readinessProbe:
      httpGet: {{path: /, port: 8080}}
      periodSeconds: 1
    lifecycle:
      preStop:
        sleep: {{seconds: 3}}
    volumeMounts: [{{name: host, mountPath: /host}}]
  - name: drain
    image: {BUSYBOX}
    command: [sh, -c, 'trap "echo term >> /host/drain; exit 0" TERM; while true; do sleep 1 & wait; done']
    lifecycle:
      preStop:
        exec: {{command: [sh, -c, 'echo hook >> /host/drain']}}
    volumeMounts: [{{name: host, mountPath: /host}}]
  volumes:
  - name: host
    hostPath: {{path: {}, type: Directory}}
"#,
        host_dir.display()
    );
    // The hooks need room: 30 s, the API's default, instead of the tests' usual 2 s.
    pod_yaml("graceful", node, &body).replace(
        "terminationGracePeriodSeconds: 2\n",
        "terminationGracePeriodSeconds: 30\n",
    )
}

#[test]
fn pre_stop_hooks_run_before_sigterm_while_the_pod_still_answers_on_its_address() {
    let cluster = Cluster::start("agstop");
    let host_dir = cluster.tmp.path().join("stop");
    std::fs::create_dir_all(&host_dir).expect("host dir");
    cluster.apply(&graceful_pod(&cluster.node_name, &host_dir));
    let ip = ready_pod_ip(&cluster, "graceful", Duration::from_secs(60));
    let url = format!("http://{ip}:8080/");

    let deleted = Instant::now();
    cluster
        .kubectl(&["delete", "pod", "graceful", "--wait=false"])
        .expect("kubectl delete");
    // Until web's SIGTERM: every request on the pod's address is answered.
    let mut answers = Vec::new();
    let term_after = loop {
        if host_dir.join("web").exists() {
            break deleted.elapsed();
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(20),
            "no SIGTERM for web within 20 s"
        );
        let sent = deleted.elapsed();
        let answer = cluster.on_node("curl", &["-sS", "-m", "1", &url]);
        answers.push((sent, answer));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        term_after >= Duration::from_secs(3),
        "web got SIGTERM {term_after:?} after the deletion, before its 3 s preStop sleep ended"
    );
    let before_term: Vec<_> = answers
        .iter()
        .filter(|(sent, _)| *sent + Duration::from_millis(200) < term_after)
        .collect();
    assert!(
        before_term.len() >= 10,
        "requests during the hook: {answers:?}"
    );
    assert!(
        before_term
            .iter()
            .all(|(_, answer)| answer.as_deref() == Ok("graceful\n")),
        "the pod answers on {ip} while its preStop hook runs: {answers:?}"
    );
    assert!(
        before_term
            .last()
            .is_some_and(|(sent, _)| *sent >= Duration::from_millis(2500)),
        "answers until about 3 s: {answers:?}"
    );

    cluster.wait_until(Duration::from_secs(30), "the pod gone", || {
        cluster.kubectl(&["get", "pod", "graceful"]).err()
    });
    let read = |name: &str| std::fs::read_to_string(host_dir.join(name)).unwrap_or_default();
    assert_eq!(read("web"), "term\n", "web stopped on SIGTERM, not killed");
    assert_eq!(
        read("drain"),
        "hook\nterm\n",
        "drain's exec hook ran before its SIGTERM"
    );
    assert!(
        cluster.runtime_state().0.is_empty(),
        "the sandbox is removed"
    );
    assert!(
        !cluster.allocated_addresses().contains(&ip),
        "address {ip} released"
    );
}
