//! The agent with a real containerd in a test host, the real keelson-apiserver and kubectl.
//! Each test builds its own cluster (see common/mod.rs); tests are grouped by topic.

mod common;

#[path = "cluster_pods/debug.rs"]
mod debug;
#[path = "cluster_pods/disk_pressure.rs"]
mod disk_pressure;
#[path = "cluster_pods/failures.rs"]
mod failures;
#[path = "cluster_pods/grpc_probes.rs"]
mod grpc_probes;
#[path = "cluster_pods/images.rs"]
mod images;
#[path = "cluster_pods/lifecycle.rs"]
mod lifecycle;
#[path = "cluster_pods/local_storage.rs"]
mod local_storage;
#[path = "cluster_pods/node_shutdown.rs"]
mod node_shutdown;
#[path = "cluster_pods/nodes.rs"]
mod nodes;
#[path = "cluster_pods/pressure.rs"]
mod pressure;
#[path = "cluster_pods/qos_cgroups.rs"]
mod qos_cgroups;
#[path = "cluster_pods/running.rs"]
mod running;
#[path = "cluster_pods/sidecars.rs"]
mod sidecars;
#[path = "cluster_pods/static_pods.rs"]
mod static_pods;
#[path = "cluster_pods/termination.rs"]
mod termination;

use std::time::Duration;

use common::*;

fn http_pod(name: &str, node: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    ports: [{{containerPort: 8080}}]\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n"
        ),
    )
}

fn ready_pod_ip(cluster: &Cluster, name: &str, timeout: Duration) -> String {
    cluster.wait_until(timeout, &format!("pod {name} Running and Ready"), || {
        let pod = cluster.pod(name);
        (pod["status"]["phase"] == "Running" && is_ready(&pod))
            .then(|| pod["status"]["podIP"].as_str().unwrap_or("").to_string())
    })
}
