//! `scripts/bench apiserver` (and `scripts/bench apiserver authz` alone): the cost of
//! authorization per request. Two servers on the same machine, one with the default
//! --authorization-mode (Node,RBAC) and one with AlwaysAllow, each with user bob (not in
//! system:masters) bound to `edit` in one namespace by a RoleBinding and 500 other users' bindings
//! beside it; bob GETs one ConfigMap and creates ConfigMaps, alternating between the servers
//! request by request so both see the same machine load. Usage: bench_authz <admin-kubeconfig-rbac>
//! <bob-kubeconfig-rbac> <admin-kubeconfig-allow> <bob-kubeconfig-allow>

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::RoleBinding;
use keelson_testing::median;
use kube::api::{Api, PostParams};
use std::path::Path;
use std::time::Instant;

const NS: &str = "bench-authz";
const REQUESTS: usize = 5000;

fn figure(name: &str, value: f64, unit: &str, baseline: Option<(&str, f64)>) {
    let base = baseline
        .map(|(b, v)| format!("   (baseline {b}: {v:.1} {unit})"))
        .unwrap_or_default();
    println!("{name:<44} {value:>12.1} {unit}{base}");
    let mut j =
        serde_json::json!({ "bench": "apiserver", "figure": name, "value": value, "unit": unit });
    if let Some((b, v)) = baseline {
        j["baseline"] = serde_json::json!({ "name": b, "value": v });
    }
    println!("{j}");
}

async fn client(kubeconfig: &str) -> kube::Client {
    keelson_daemon::client(Some(Path::new(kubeconfig)))
        .await
        .unwrap()
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The namespace, bob's RoleBinding to `edit`, 500 bindings of other users, one ConfigMap.
async fn prepare(admin: &kube::Client) {
    let ns: Namespace = from_json(serde_json::json!({ "metadata": { "name": NS } }));
    let _ = Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await;
    let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), NS);
    for (name, user) in (0..500)
        .map(|i| (format!("other-{i}"), format!("user-{i}")))
        .chain([("bob-edit".to_string(), "bob".to_string())])
    {
        let rb: RoleBinding = from_json(serde_json::json!({
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
        }));
        let _ = rbs.create(&PostParams::default(), &rb).await;
    }
    let cm: ConfigMap =
        from_json(serde_json::json!({ "metadata": { "name": "c" }, "data": { "k": "v" } }));
    let _ = Api::<ConfigMap>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await;
}

/// Microseconds of one request (a GET, or a create when `write`).
async fn request(api: &Api<ConfigMap>, write: bool, name: &str) -> f64 {
    let t = Instant::now();
    if write {
        let cm: ConfigMap = from_json(serde_json::json!({ "metadata": { "name": name } }));
        api.create(&PostParams::default(), &cm).await.unwrap();
    } else {
        api.get("c").await.unwrap();
    }
    t.elapsed().as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (rbac_admin, rbac_bob) = (client(&args[1]).await, client(&args[2]).await);
    let (allow_admin, allow_bob) = (client(&args[3]).await, client(&args[4]).await);
    prepare(&rbac_admin).await;
    prepare(&allow_admin).await;
    let rbac: Api<ConfigMap> = Api::namespaced(rbac_bob, NS);
    let allow: Api<ConfigMap> = Api::namespaced(allow_bob, NS);
    // bob is let in by his RoleBinding, not by a group that is always allowed.
    rbac.get("c").await.unwrap();
    for (write, what) in [(false, "GET"), (true, "create")] {
        eprintln!("authorization cost: {REQUESTS} {what}s on each server, alternating...");
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for i in 0..REQUESTS {
            // Alternating per request, and which goes first, so drift and order cancel out.
            let name = format!("c-{i}");
            if i % 2 == 0 {
                on.push(request(&rbac, write, &name).await);
                off.push(request(&allow, write, &name).await);
            } else {
                off.push(request(&allow, write, &name).await);
                on.push(request(&rbac, write, &name).await);
            }
        }
        let (on, off) = (median(on), median(off));
        figure(
            &format!("{what} as bob, Node,RBAC (median)"),
            on,
            "µs",
            Some(("AlwaysAllow", off)),
        );
        figure(
            &format!("{what}: authorization cost per request"),
            on - off,
            "µs",
            None,
        );
    }
}
