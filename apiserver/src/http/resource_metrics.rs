//! metrics.k8s.io/v1beta1 (`kubectl top`), served by the API server itself instead of an
//! aggregated metrics-server: each request asks the agents of the Ready nodes concerned for the
//! kubelet Summary API (GET /stats/summary), over the kubelet client connection pods/log uses,
//! and answers NodeMetrics and PodMetrics from what they report. Nothing is stored.

use super::kubelet_client::KubeletClient;
use super::logs::kubelet_endpoint;
use super::route::ResourcePath;
use super::{json_value, Call};
use crate::object;
use crate::resources::{self, METRICS_GROUP};
use crate::rest::{Api, Filter, ListParams};
use crate::status::{ApiError, ApiResult};
use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long one agent may take: a node that does not answer is left out, as metrics-server
/// does, rather than holding `kubectl top` for the whole cluster.
const AGENT_TIMEOUT: Duration = Duration::from_secs(3);
/// The window metrics-server reports for its samples (the agents' usage is a rate over ~10s).
const WINDOW: &str = "10s";

pub async fn handle(
    api: &Api,
    kubelet: &KubeletClient,
    rp: &ResourcePath,
    call: &Call,
) -> ApiResult<Response> {
    let params: ListParams = serde_urlencoded::from_str(call.query())
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let watch = rp.legacy_watch || params.watch.as_deref().is_some_and(|w| w != "false");
    if call.method() != Method::GET || watch {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {}.{METRICS_GROUP})",
            if watch { "WATCH" } else { call.method().as_str() },
            rp.res.plural
        )));
    }
    let ask = Ask {
        api,
        kubelet,
        rp,
        filter: Filter::new(&params)?,
        now: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let items = match rp.res.kind {
        "NodeMetrics" => node_metrics(&ask).await,
        _ => pod_metrics(&ask).await,
    };
    if !rp.name.is_empty() {
        let singular = rp.res.kind.to_lowercase();
        return match items.into_iter().next() {
            Some(item) => Ok(json_value(StatusCode::OK, &item)),
            None => Err(ApiError::not_found(METRICS_GROUP, &singular, &rp.name)),
        };
    }
    let list = json!({
        "kind": rp.res.list_kind(), "apiVersion": rp.res.api_version(),
        "metadata": {}, "items": items,
    });
    Ok(json_value(StatusCode::OK, &list))
}

/// The stored objects of a core kind under a namespace ("" for all), optionally one by name.
fn stored(api: &Api, plural: &str, namespace: &str, name: &str) -> Vec<Value> {
    let Some(res) = resources::lookup("", "v1", plural) else {
        return Vec::new();
    };
    if !name.is_empty() {
        return api
            .store
            .get(&res.key(namespace, name))
            .map(|e| (*e.value()).clone())
            .into_iter()
            .collect();
    }
    let prefix = match namespace {
        "" => res.key_prefix(),
        ns => format!("{}{ns}/", res.key_prefix()),
    };
    let (entries, _) = api.store.list(&prefix);
    entries.iter().map(|e| (*e.value()).clone()).collect()
}

fn is_ready(node: &Value) -> bool {
    let conditions = node.pointer("/status/conditions").and_then(Value::as_array);
    conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True"))
        })
    })
}

/// One metrics request: what it asks for and whom the server asks.
struct Ask<'a> {
    api: &'a Api,
    kubelet: &'a KubeletClient,
    rp: &'a ResourcePath,
    filter: Filter,
    /// When the request came (RFC 3339): the answers' creationTimestamp.
    now: String,
}

async fn node_metrics(ask: &Ask<'_>) -> Vec<Value> {
    let (api, rp, now) = (ask.api, ask.rp, ask.now.as_str());
    let nodes: Vec<Value> = stored(api, "nodes", "", &rp.name)
        .into_iter()
        .filter(|n| is_ready(n) && ask.filter.matches(n))
        .collect();
    let names: Vec<&str> = nodes.iter().map(object::name).collect();
    let summaries = summaries(api, ask.kubelet, &names).await;
    nodes
        .iter()
        .filter_map(|n| {
            let summary = summaries.get(object::name(n))?;
            let usage = usage(summary.get("node")?)?;
            Some(json!({
                "kind": "NodeMetrics", "apiVersion": rp.res.api_version(),
                "metadata": { "name": object::name(n), "creationTimestamp": now,
                    "labels": n.pointer("/metadata/labels").cloned().unwrap_or(json!({})) },
                "timestamp": sample_time(summary.get("node")?, now),
                "window": WINDOW, "usage": usage,
            }))
        })
        .collect()
}

async fn pod_metrics(ask: &Ask<'_>) -> Vec<Value> {
    let (api, rp, now) = (ask.api, ask.rp, ask.now.as_str());
    let pods: Vec<Value> = stored(api, "pods", &rp.namespace, &rp.name)
        .into_iter()
        .filter(|p| ask.filter.matches(p))
        .collect();
    let on: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.pointer("/spec/nodeName")?.as_str())
        .collect();
    let ready: BTreeSet<String> = on
        .iter()
        .flat_map(|n| stored(api, "nodes", "", n))
        .filter(is_ready)
        .map(|n| object::name(&n).to_string())
        .collect();
    let names: Vec<&str> = ready.iter().map(String::as_str).collect();
    let summaries = summaries(api, ask.kubelet, &names).await;
    // Each pod as its node reports it: (namespace, name) -> the summary's pod entry.
    let reported: BTreeMap<(&str, &str), &Value> = summaries
        .values()
        .filter_map(|s| s.get("pods")?.as_array())
        .flatten()
        .filter_map(|p| {
            let r = p.get("podRef")?;
            Some(((r.get("namespace")?.as_str()?, r.get("name")?.as_str()?), p))
        })
        .collect();
    pods.iter()
        .filter_map(|pod| {
            let key = (object::namespace(pod), object::name(pod));
            pod_entry(pod, reported.get(&key)?, rp, now)
        })
        .collect()
}

/// A PodMetrics, or None when the agent reports no usage for any container (a pod just
/// started), as metrics-server leaves such pods out.
fn pod_entry(pod: &Value, reported: &Value, rp: &ResourcePath, now: &str) -> Option<Value> {
    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str);
    let reported_uid = reported.pointer("/podRef/uid").and_then(Value::as_str);
    if uid.is_some() && reported_uid.is_some_and(|r| Some(r) != uid) {
        return None; // an earlier pod of the same name
    }
    let containers: Vec<Value> = reported
        .get("containers")?
        .as_array()?
        .iter()
        .filter_map(|c| Some(json!({ "name": c.get("name")?, "usage": usage(c)? })))
        .collect();
    let first = reported.pointer("/containers/0")?;
    (!containers.is_empty()).then(|| {
        json!({
            "kind": "PodMetrics", "apiVersion": rp.res.api_version(),
            "metadata": { "name": object::name(pod), "namespace": object::namespace(pod),
                "creationTimestamp": now,
                "labels": pod.pointer("/metadata/labels").cloned().unwrap_or(json!({})) },
            "timestamp": sample_time(first, now), "window": WINDOW, "containers": containers,
        })
    })
}

/// {"cpu", "memory"} from a Summary API entry's usageNanoCores and workingSetBytes.
fn usage(stats: &Value) -> Option<Value> {
    let cpu = stats.pointer("/cpu/usageNanoCores")?.as_u64()?;
    let memory = stats.pointer("/memory/workingSetBytes")?.as_u64()?;
    Some(json!({ "cpu": cpu_quantity(cpu), "memory": memory_quantity(memory) }))
}

fn sample_time(stats: &Value, now: &str) -> Value {
    stats
        .pointer("/cpu/time")
        .cloned()
        .unwrap_or_else(|| json!(now))
}

/// Nanocores as resource.Quantity writes them (metrics-server's NewScaledQuantity(n, -9)):
/// trailing zeros fold into the next suffix, so 250000000n is "250m".
pub(super) fn cpu_quantity(nanos: u64) -> String {
    fold(nanos, 1000, &["n", "u", "m", "", "k", "M", "G"])
}

/// Bytes as a BinarySI Quantity writes them: the largest power of 1024 that divides exactly
/// ("64Mi", "1735664Ki"); below 1024 in decimal, as upstream.
pub(super) fn memory_quantity(bytes: u64) -> String {
    match bytes < 1024 {
        true => fold(bytes, 1000, &["", "k"]),
        false => fold(bytes, 1024, &["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    }
}

/// `value` with each whole factor of `base` moved into the next suffix.
fn fold(value: u64, base: u64, suffixes: &[&str]) -> String {
    if value == 0 {
        return "0".into();
    }
    let (mut n, mut suffix) = (value, "");
    for (i, s) in suffixes.iter().enumerate() {
        suffix = s;
        if n % base != 0 || i + 1 == suffixes.len() {
            break;
        }
        n /= base;
    }
    format!("{n}{suffix}")
}

/// The Summary API document of each named node whose agent answered in time.
async fn summaries(api: &Api, kubelet: &KubeletClient, nodes: &[&str]) -> BTreeMap<String, Value> {
    let asks = nodes.iter().map(|node| async move {
        let (addr, port) = kubelet_endpoint(api, node, "").ok()?;
        let got = tokio::time::timeout(AGENT_TIMEOUT, summary(kubelet, &addr, port)).await;
        match got {
            Ok(Ok(v)) => Some((node.to_string(), v)),
            Ok(Err(e)) => {
                tracing::debug!(%node, error = %e, "no metrics from the node's agent");
                None
            }
            Err(_) => {
                tracing::debug!(%node, "the node's agent did not answer /stats/summary in time");
                None
            }
        }
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

async fn summary(kubelet: &KubeletClient, addr: &str, port: u16) -> Result<Value, String> {
    let tls = kubelet.connect(addr, port).await?;
    let (status, body) =
        keelson_daemon::http_get::get(tls, addr, "/stats/summary?only_cpu_and_memory=true", None)
            .await?;
    if !status.is_success() {
        return Err(format!("/stats/summary answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("/stats/summary: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_as_resource_quantity_does() {
        assert_eq!(cpu_quantity(123456), "123456n");
        assert_eq!(cpu_quantity(250_000_000), "250m");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(cpu_quantity(1_500_000), "1500u");
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(memory_quantity(64 * 1024 * 1024), "64Mi");
        assert_eq!(memory_quantity(1_735_664 * 1024), "1735664Ki");
        assert_eq!(memory_quantity(1_000_001), "1000001");
        assert_eq!(memory_quantity(1000), "1k");
    }

    #[test]
    fn usage_needs_both_cpu_and_memory() {
        let full = json!({"cpu": {"usageNanoCores": 5}, "memory": {"workingSetBytes": 4096}});
        assert_eq!(usage(&full), Some(json!({"cpu": "5n", "memory": "4Ki"})));
        assert_eq!(usage(&json!({"cpu": {"usageNanoCores": 5}})), None);
    }
}
