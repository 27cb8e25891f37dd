//! The figures of a large store: `pods` pods created (32 at a time), the size of their JSON as
//! stored (the floor the server's memory is held to), full lists and kubectl's chunked lists,
//! and one write's delivery to `watchers` watches beside its delivery to one. The server's RSS
//! and its start time on this store are the script's to take (it holds the process).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};

use super::{create_pods, delivery, figure, pct};

pub async fn run(client: kube::Client, pods: usize, watchers: usize) {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in ["scale-p", "scale-watch"] {
        let obj: Namespace =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": ns } })).unwrap();
        let _ = ns_api.create(&PostParams::default(), &obj).await;
    }
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "scale-p");
    eprintln!("creating {pods} pods...");
    let t = Instant::now();
    create_pods(&pod_api, pods).await;
    let secs = t.elapsed().as_secs_f64();
    figure(
        "pods created per second",
        pods as f64 / secs,
        "pods/s",
        None,
    );
    lists(&client, pods).await;
    fan_out(&client, watchers).await;
}

/// Full lists (one response of every pod) and kubectl's chunked list (limit=500 pages).
async fn lists(client: &kube::Client, pods: usize) {
    eprintln!("listing {pods} pods (10 full lists, 3 chunked)...");
    let url = "/api/v1/namespaces/scale-p/pods";
    let mut times = Vec::new();
    let mut body = String::new();
    for _ in 0..10 {
        let t = Instant::now();
        let req = http::Request::get(url).body(Vec::new()).unwrap();
        body = client.request_text(req).await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    figure("full list p50", pct(&times, 0.5), "ms", None);
    figure("full list p99", pct(&times, 0.99), "ms", None);
    // What the store holds: every object as compact JSON (the server's memory floor).
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), pods, "the list holds every pod");
    let stored: usize = items
        .iter()
        .map(|o| serde_json::to_vec(o).unwrap().len())
        .sum();
    figure("stored JSON of the pods", stored as f64 / 1e6, "MB", None);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "scale-p");
    let mut chunked = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (mut seen, mut next) = (0, None::<String>);
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(token) = &next {
                lp = lp.continue_token(token);
            }
            let page = pod_api.list(&lp).await.unwrap();
            seen += page.items.len();
            next = page.metadata.continue_.filter(|c| !c.is_empty());
            if next.is_none() {
                break;
            }
        }
        assert_eq!(seen, pods, "the chunked list holds every pod");
        chunked.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    chunked.sort_by(f64::total_cmp);
    figure(
        "chunked list (limit 500), median of 3",
        chunked[1],
        "ms",
        None,
    );
}

/// The delay from a create to its ADDED event at each of `watchers` watches, beside the same
/// with one watch (the floor: one write, one delivery).
async fn fan_out(client: &kube::Client, watchers: usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "scale-watch");
    // Spaced so each write's fan-out is measured, not a queue of writes.
    let writes = (50, Duration::from_millis(20));
    let one = delivery(&api, 1, writes, "one").await;
    eprintln!("watch delivery to {watchers} watchers (50 writes)...");
    let many = delivery(&api, watchers, writes, "many").await;
    let label = format!("watch delivery p50, {watchers} watchers");
    figure(
        &label,
        pct(&many, 0.5),
        "ms",
        Some(("1 watcher", pct(&one, 0.5))),
    );
    let label = format!("watch delivery p99, {watchers} watchers");
    figure(
        &label,
        pct(&many, 0.99),
        "ms",
        Some(("1 watcher", pct(&one, 0.99))),
    );
    figure(
        "watch events delivered",
        many.len() as f64,
        "events",
        Some(("expected", (watchers * 50) as f64)),
    );
}
