//! gRPC probes against the grpc-health test image (testing/grpc-health, built by
//! scripts/images/build): it answers SERVING while /tmp/healthy exists in its container.

use std::time::Duration;

use super::common::*;
use super::ready_pod_ip;

const GRPC_IMAGE: &str = "127.0.0.1:5000/keelson/grpc-health:1";

/// A pod of the grpc-health image (serving on 9090) with `probe` (YAML lines under the container).
fn grpc_pod(name: &str, node: &str, probe: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  containers:\n  - name: app\n    image: {GRPC_IMAGE}\n    ports: [{{containerPort: 9090}}]\n{probe}"
        ),
    )
}

#[test]
fn grpc_probes_ask_the_health_service() {
    let cluster = Cluster::start("aggrpc");
    let node = cluster.node_name.clone();
    cluster.apply(&grpc_pod(
        "health",
        &node,
        "    readinessProbe:\n      grpc: {port: 9090}\n      periodSeconds: 1\n      failureThreshold: 1\n",
    ));
    // Nothing serves 9999: each check is refused, and the container is killed and restarted.
    cluster.apply(&grpc_pod(
        "deaf",
        &node,
        "    livenessProbe:\n      grpc: {port: 9999, service: app}\n      periodSeconds: 1\n      failureThreshold: 2\n",
    ));

    let ip = ready_pod_ip(&cluster, "health", Duration::from_secs(60));

    // The health service turns NOT_SERVING: the pod leaves Ready, saying why, and is not restarted.
    cluster
        .kubectl(&["exec", "health", "--", "rm", "/tmp/healthy"])
        .expect("kubectl exec rm");
    cluster.wait_until(Duration::from_secs(20), "pod health not Ready", || {
        (!is_ready(&cluster.pod("health"))).then_some(())
    });
    let unhealthy =
        r#"Unhealthy: Readiness probe failed: service unhealthy (responded with "NOT_SERVING")"#;
    cluster.wait_until(Duration::from_secs(10), "the Unhealthy event", || {
        let events = cluster.pod_events("health");
        events.iter().any(|e| e == unhealthy).then_some(())
    });
    assert_eq!(container_ids(&cluster.pod("health"))["app"].1, 0);

    // SERVING again: Ready again.
    cluster
        .kubectl(&["exec", "health", "--", "touch", "/tmp/healthy"])
        .expect("kubectl exec touch");
    assert_eq!(
        ready_pod_ip(&cluster, "health", Duration::from_secs(20)),
        ip
    );

    // Liveness: restarted, with the gRPC failure in the event.
    cluster.wait_until(Duration::from_secs(40), "pod deaf restarted", || {
        (container_ids(&cluster.pod("deaf"))
            .get("app")
            .is_some_and(|(_, restarts)| *restarts >= 1))
        .then_some(())
    });
    let deaf_ip = cluster.pod("deaf")["status"]["podIP"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let events = cluster.pod_events("deaf");
    let refused = format!(
        "Unhealthy: Liveness probe failed: error: failed to connect service at \"{deaf_ip}:9999\": "
    );
    assert!(
        events.iter().any(|e| e.starts_with(&refused)),
        "{refused} in {events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Killing: Container app failed liveness probe")),
        "{events:?}"
    );
}
