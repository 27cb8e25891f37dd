//! The node lifecycle controller's writes. Failures are logged and counted, not returned: the
//! next pass (one monitor period later) decides again from fresh stores and retries.

use super::{monitor::NodeUpdate, COMPONENT};
use crate::api::{delete_if_present, patch_status};
use crate::Ctx;
use k8s_openapi::api::core::v1::{Node, Pod};
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::ResourceExt;

/// Writes `update` to `node`; when the node just turned Unknown, its pods stop being Ready (so
/// Services stop sending them traffic before they are evicted), as upstream's MarkPodsNotReady.
pub async fn apply(ctx: &Ctx, node: &Node, update: &NodeUpdate, pods: &[&Pod]) {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let name = node.name_any();
    if let Some(taints) = &update.taints {
        tracing::info!(node = %name, taints = ?taints.iter().map(|t| &t.key).collect::<Vec<_>>(), "updating node taints");
        // The resourceVersion makes this a compare-and-swap: a taint someone else changed
        // meanwhile is not overwritten (409, retried next pass from the fresh Node). Taints go
        // first, as the status write below changes the resourceVersion.
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": node.resource_version() },
            "spec": { "taints": taints },
        });
        if let Err(e) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            failed(ctx, &name, "updating node taints", &e);
        }
    }
    if let Some(conditions) = &update.conditions {
        tracing::warn!(node = %name, "node stopped posting status; marking its conditions Unknown");
        let patch = serde_json::json!({ "status": { "conditions": conditions } });
        match patch_status(&api, &name, &patch).await {
            Ok(()) => ctx.events.reporting(COMPONENT).publish(
                node,
                EventType::Normal,
                "NodeNotReady",
                format!("Node {name} status is now: NodeNotReady"),
            ),
            Err(e) => failed(ctx, &name, "marking node conditions Unknown", &e),
        }
        for pod in pods {
            mark_not_ready(ctx, pod).await;
        }
    }
}

/// Sets the pod's Ready condition False (other conditions kept).
async fn mark_not_ready(ctx: &Ctx, pod: &Pod) {
    let Some(mut conditions) = pod.status.as_ref().and_then(|s| s.conditions.clone()) else {
        return;
    };
    let Some(ready) = conditions
        .iter_mut()
        .find(|c| c.type_ == "Ready" && c.status != "False")
    else {
        return;
    };
    ready.status = "False".into();
    ready.reason = Some("NodeNotReady".into());
    ready.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": { "conditions": conditions } });
    match patch_status(&api, &pod.name_any(), &patch).await {
        // Upstream's MarkPodsNotReady records it after the write, once the pod surely exists.
        Ok(()) => ctx.events.reporting(COMPONENT).publish(
            pod,
            EventType::Warning,
            "NodeNotReady",
            "Node is not ready",
        ),
        Err(e) => failed(ctx, &pod.name_any(), "marking pod not ready", &e),
    }
}

/// Upstream's name for the part of node lifecycle that evicts from NoExecute taints.
const TAINT_EVICTION: &str = "taint-eviction-controller";

/// Deletes `pod` with an Event saying why; true when it is gone or going.
pub async fn evict(ctx: &Ctx, pod: &Pod) -> bool {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let message = format!("Marking for deletion Pod {ns}/{name}");
    ctx.events.reporting(TAINT_EVICTION).publish(
        pod,
        EventType::Normal,
        "TaintManagerEviction",
        message,
    );
    match delete_if_present(&api, &name, &DeleteParams::default()).await {
        Ok(()) => {
            tracing::info!(pod = %name, namespace = %ns, node = ?pod.spec.as_ref().and_then(|s| s.node_name.as_deref()), "evicted from a NoExecute-tainted node");
            ctx.metrics.taint_evictions.inc();
            true
        }
        Err(e) => {
            failed(ctx, &name, "evicting pod", &e);
            false
        }
    }
}

fn failed(ctx: &Ctx, name: &str, what: &str, e: &kube::Error) {
    ctx.metrics.errors.inc();
    tracing::warn!(object = %name, error = %e, "{what} failed; retrying next pass");
}
