//! keelson-agent against an API server Keelson did not write: kmock's emulator (PyPI `kmock`)
//! in the control-plane host, which keeps objects as posted (no uid, resourceVersion or
//! defaults of its own), ignores selectors and streams watches without resourceVersions. The
//! agent registers its Node there, runs the pod bound to it in containerd and reports its
//! status back, ignores a pod bound to another node (sent too, as the emulator ignores the
//! field selector), and tears the pod down when it is deleted.

mod common;

use std::time::Duration;

use common::{Cluster, BUSYBOX, CP_IP};
use keelson_testing::{Kmock, TestHost};
use serde_json::{json, Value};

/// One request to the emulator from inside the control-plane host; the JSON answer.
fn call(cp: &TestHost, url: &str, method: &str, body: Option<&Value>) -> Value {
    let data = match body {
        Some(b) => format!(
            "-H 'Content-Type: application/json' --data-binary '{}'",
            b.to_string().replace('\'', "")
        ),
        None => String::new(),
    };
    let out = cp.sh_ok(&format!("curl -s -X {method} {data} '{url}'"));
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

fn pod(name: &str, uid: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]}]
        }
    })
}

#[test]
fn agent_runs_and_reports_pods_from_kmock() {
    let mut cluster = Cluster::control_plane("akm");
    let kmock = Kmock::start_in(
        &cluster.cp,
        CP_IP,
        &[
            "v1/nodes",
            "v1/pods",
            "v1/services",
            "v1/events",
            "v1/configmaps",
            "v1/secrets",
            "coordination.k8s.io/v1/leases",
        ],
    );
    let node = cluster.add_node_against("akm", &kmock.kubeconfig());
    let api = kmock.url.clone();
    let cp = &cluster.cp;
    cluster.wait_until(Duration::from_secs(30), "the Node Ready in kmock", || {
        let n = call(cp, &format!("{api}/api/v1/nodes/{node}"), "GET", None);
        let ready = n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(())
    });

    let pods = format!("{api}/api/v1/namespaces/default/pods");
    call(
        cp,
        &pods,
        "POST",
        Some(&pod("elsewhere", "uid-elsewhere", "another-node")),
    );
    call(cp, &pods, "POST", Some(&pod("web", "uid-web", &node)));
    let status = cluster.wait_until(Duration::from_secs(60), "the pod Running in kmock", || {
        let p = call(cp, &format!("{pods}/web"), "GET", None);
        let s = &p["status"];
        (s["phase"] == "Running"
            && s["podIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.244.")))
        .then(|| s.clone())
    });
    assert_eq!(
        status["containerStatuses"][0]["ready"], true,
        "the container's status: {status}"
    );
    // The container really runs in containerd, and only this node's pod does.
    let (sandboxes, containers) = cluster.runtime_state();
    let running: Vec<_> = sandboxes
        .iter()
        .filter_map(|s| s.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    assert_eq!(running, vec!["web".to_string()], "sandboxes: {sandboxes:?}");
    assert!(
        containers.iter().any(|c| c.state == 1),
        "no running container: {containers:?}"
    );
    let other = call(cp, &format!("{pods}/elsewhere"), "GET", None);
    assert!(
        other["status"].is_null(),
        "another node's pod got a status from this agent: {other}"
    );

    call(cp, &format!("{pods}/web"), "DELETE", None);
    cluster.wait_until(Duration::from_secs(60), "the deleted pod torn down", || {
        cluster.runtime_state().0.is_empty().then_some(())
    });
    drop(kmock);
}
