//! Carrying out a preemption, as upstream's prepareCandidate: the preemptor is nominated to
//! the node (so users and other schedulers see the claim), and each victim is marked
//! DisruptionTarget, deleted with its own grace period, and told why by an Event.

use k8s_openapi::api::core::v1::Pod;
use keelson_daemon::events::{EventType, Recorder};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use std::sync::Arc;

/// Sets the Pod's status.nominatedNodeName, or clears it (None).
pub(crate) async fn nominate(client: &kube::Client, pod: &Pod, node: Option<&str>) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": { "nominatedNodeName": node } });
    if let Err(e) = api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(pod = %pod.name_any(), ?node, error = %e, "could not set nominatedNodeName");
    }
}

/// Deletes the victims; returns the uids of those that could not be deleted (still running).
pub(crate) async fn preempt(
    client: &kube::Client,
    events: &Recorder,
    preemptor: &Pod,
    node: &str,
    victims: &[Arc<Pod>],
) -> Vec<String> {
    let uid = preemptor.uid().unwrap_or_default();
    let uid = uid.as_str();
    let deletes = victims.iter().map(|v| async move {
        let ok = evict(client, v).await;
        if ok {
            events.publish(
                &**v,
                EventType::Normal,
                "Preempted",
                format!("Preempted by pod {uid} on node {node}"),
            );
        }
        (!ok).then(|| v.uid().unwrap_or_default())
    });
    futures::future::join_all(deletes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Marks and deletes one victim; true once it is terminating or gone.
async fn evict(client: &kube::Client, victim: &Pod) -> bool {
    let name = victim.name_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace().unwrap_or_default());
    let scheduler = victim
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or(crate::SCHEDULER_NAME);
    let condition = serde_json::json!({ "status": { "conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": format!("{scheduler}: preempting to accommodate a higher priority pod"),
    }]}});
    // Only informative (the Job controller reads it for podFailurePolicy): a failure here
    // does not stop the eviction.
    if let Err(e) = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(&condition),
        )
        .await
    {
        tracing::info!(pod = %name, error = %e, "could not mark the preemption victim");
    }
    // The uid precondition: a Pod recreated under the same name is not this victim.
    let params = DeleteParams {
        preconditions: victim.uid().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => true,
        Err(kube::Error::Api(e)) if e.is_not_found() => true,
        Err(e) => {
            tracing::warn!(pod = %name, error = %e, "could not delete the preemption victim");
            false
        }
    }
}
