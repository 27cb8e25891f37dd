//! The ReplicaSet controller: keeps spec.replicas active Pods from the template, and reports
//! how many exist and are ready. Pods to delete are chosen in upstream's order (`ranking`).

mod ranking;

use crate::api::{delete_if_present, list_selected, patch_status};
use crate::pods::{controller_of, is_active, is_controlled_by, is_ready, owner_ref};
use crate::{Ctx, Error};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "replicaset-controller";

#[derive(Debug, PartialEq)]
pub struct Plan {
    pub create: usize,
    pub delete: Vec<String>,
    pub status: ReplicaSetStatus,
}

/// Decides what to create and delete for the Pods this ReplicaSet controls; `related` are the
/// Pods of every ReplicaSet with the same owner (Pods doubled up on a node go first).
pub fn plan(rs: &ReplicaSet, owned: &[Pod], related: &[Pod], now: Timestamp) -> Plan {
    let want = rs.spec.replicas.unwrap_or(1).max(0) as usize;
    let active: Vec<&Pod> = owned.iter().filter(|p| is_active(p)).collect();
    let (create, delete) = if active.len() < want {
        (want - active.len(), Vec::new())
    } else {
        let related: Vec<&Pod> = related.iter().filter(|p| is_active(p)).collect();
        let extra = active.len() - want;
        (0, ranking::to_delete(&active, &related, extra, now))
    };
    let ready = active.iter().filter(|p| is_ready(p)).count() as i32;
    let status = ReplicaSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: Some(active.len() as i32),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        observed_generation: rs.metadata.generation,
        ..Default::default()
    };
    Plan {
        create,
        delete,
        status,
    }
}

fn new_pod(rs: &ReplicaSet) -> Result<Pod, Error> {
    let template = rs
        .spec
        .template
        .clone()
        .ok_or_else(|| Error::Invalid("ReplicaSet has no template".into()))?;
    let mut meta = template.metadata.unwrap_or_default();
    meta.generate_name = Some(format!("{}-", rs.name_any()));
    meta.namespace = rs.namespace();
    meta.owner_references = Some(vec![owner_ref(
        "apps/v1",
        "ReplicaSet",
        &rs.name_any(),
        &rs.uid().unwrap_or_default(),
    )]);
    Ok(Pod {
        metadata: meta,
        spec: template.spec,
        status: None,
    })
}

/// The Pods of every ReplicaSet controlled by the same owner as `rs` (a Deployment's old and
/// new ones), or `rs`'s own when it has no owner, as upstream's getIndirectlyRelatedPods.
async fn related_pods(
    rs: &ReplicaSet,
    client: &kube::Client,
    pods: &Api<Pod>,
    owned: &[Pod],
) -> Result<Vec<Pod>, kube::Error> {
    let Some(owner) = controller_of(rs) else {
        return Ok(owned.to_vec());
    };
    let rsapi: Api<ReplicaSet> =
        Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
    let siblings: HashSet<String> = rsapi
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|r| is_controlled_by(*r, &owner.uid))
        .filter_map(|r| r.uid())
        .collect();
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| controller_of(p).is_some_and(|c| siblings.contains(&c.uid)))
        .collect())
}

pub async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if rs.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = rs.namespace().unwrap_or_default();
    let uid = rs.uid().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // Deliberately a LIST from the API server, not the watch cache: it is consistent (read
    // from the store), so Pods this controller made moments ago are always in it and a lagging
    // cache cannot make it create them twice. Upstream's expectations solve that lag for its
    // informer reads; with this read they are not needed (at the price of one LIST per sync).
    let owned: Vec<Pod> = pods
        .list(&list_selected(&rs.spec.selector)?)
        .await?
        .items
        .into_iter()
        .filter(|p| is_controlled_by(p, &uid))
        .collect();
    let want = rs.spec.replicas.unwrap_or(1).max(0) as usize;
    let related = if owned.iter().filter(|p| is_active(p)).count() > want {
        related_pods(&rs, &ctx.client, &pods, &owned).await?
    } else {
        Vec::new()
    };
    let plan = plan(&rs, &owned, &related, Timestamp::now());
    let events = ctx.events.reporting(COMPONENT);
    for _ in 0..plan.create {
        match pods.create(&PostParams::default(), &new_pod(&rs)?).await {
            Ok(made) => {
                let message = format!("Created pod: {}", made.name_any());
                events.publish(rs.as_ref(), EventType::Normal, "SuccessfulCreate", message);
            }
            Err(e) => {
                let message = format!("Error creating: {e}");
                events.publish(rs.as_ref(), EventType::Warning, "FailedCreate", message);
                return Err(e.into());
            }
        }
    }
    for name in &plan.delete {
        delete_if_present(&pods, name, &DeleteParams::default()).await?;
        let message = format!("Deleted pod: {name}");
        events.publish(rs.as_ref(), EventType::Normal, "SuccessfulDelete", message);
    }
    if plan.create > 0 || !plan.delete.is_empty() {
        tracing::info!(replicaset = %rs.name_any(), namespace = %ns, created = plan.create, deleted = plan.delete.len(), "scaled");
    }
    if rs.status.as_ref() != Some(&plan.status) {
        let rsapi: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = serde_json::json!({ "status": plan.status });
        patch_status(&rsapi, &rs.name_any(), &patch).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::pod;

    fn rs(replicas: i32) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web-1", "namespace": "default", "generation": 2 },
            "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web" } },
                "template": { "metadata": { "labels": { "app": "web" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        }))
        .unwrap()
    }

    #[test]
    fn creates_the_missing_and_counts_ready() {
        let p = plan(&rs(3), &[pod("a", true, "Running")], &[], Timestamp::now());
        assert_eq!(p.create, 2);
        assert!(p.delete.is_empty());
        assert_eq!(
            (
                p.status.replicas,
                p.status.ready_replicas,
                p.status.observed_generation
            ),
            (1, Some(1), Some(2))
        );
    }

    #[test]
    fn deletes_unready_before_ready_and_ignores_finished() {
        let pods = [
            pod("ready", true, "Running"),
            pod("slow", false, "Pending"),
            pod("done", false, "Succeeded"),
        ];
        let p = plan(&rs(1), &pods, &pods, Timestamp::now());
        assert_eq!((p.create, p.delete.clone()), (0, vec!["slow".to_string()]));
        let p = plan(&rs(2), &pods, &pods, Timestamp::now());
        assert_eq!((p.create, p.delete.len()), (0, 0));
    }

    #[test]
    fn new_pods_follow_the_template_and_point_to_their_owner() {
        let mut r = rs(1);
        r.metadata.uid = Some("u1".into());
        let p = new_pod(&r).unwrap();
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-1-"));
        assert_eq!(p.metadata.labels.unwrap()["app"], "web");
        assert_eq!(p.metadata.owner_references.unwrap()[0].uid, "u1");
    }
}
