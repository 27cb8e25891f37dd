//! The disruption controller: keeps each PodDisruptionBudget's status (expected and healthy
//! pods, disruptionsAllowed, the DisruptionAllowed condition) current as its pods change, as
//! upstream's; the API server's eviction subresource reads it, so `kubectl drain` waits
//! instead of breaking a budget. The arithmetic is in `plan`.

pub mod plan;

use crate::api::list_selected;
use crate::pods::is_ready;
use crate::{Ctx, Error};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "controllermanager";
/// How long an eviction the API server granted counts against the budget while its pod is not
/// yet gone (upstream's DeletionTimeout).
const DISRUPTION_TIMEOUT_SECS: i64 = 120;

/// Runs until SIGTERM or Ctrl-C: woken by budgets and by pods of their namespaces.
pub async fn run(ctx: Arc<Ctx>) {
    crate::run_woken_by_pods::<PodDisruptionBudget, _, _>(ctx, reconcile).await;
}

/// The replicas the pods' controllers ask for, summed once per controller; None when a pod has
/// none with a scale (a Deployment through its ReplicaSet, a ReplicaSet, a StatefulSet).
async fn controllers_scale(
    client: &kube::Client,
    ns: &str,
    pods: &[&Pod],
) -> Result<Option<i32>, Error> {
    let mut seen = BTreeSet::new();
    let mut total = 0;
    for pod in pods {
        let Some(owner) = crate::pods::controller_of(*pod) else {
            return Ok(None);
        };
        let replicas = match owner.kind.as_str() {
            "ReplicaSet" => {
                let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
                    .get(&owner.name)
                    .await?;
                match crate::pods::controller_of(&rs).filter(|o| o.kind == "Deployment") {
                    Some(d) if seen.insert(("Deployment", d.name.clone())) => {
                        let dep = Api::<Deployment>::namespaced(client.clone(), ns)
                            .get(&d.name)
                            .await?;
                        dep.spec.replicas.unwrap_or(1)
                    }
                    Some(_) => continue,
                    None if seen.insert(("ReplicaSet", owner.name.clone())) => {
                        rs.spec.replicas.unwrap_or(1)
                    }
                    None => continue,
                }
            }
            "StatefulSet" if seen.insert(("StatefulSet", owner.name.clone())) => {
                let ss = Api::<StatefulSet>::namespaced(client.clone(), ns)
                    .get(&owner.name)
                    .await?;
                ss.spec.replicas.unwrap_or(1)
            }
            "StatefulSet" => continue,
            _ => return Ok(None),
        };
        total += replicas;
    }
    Ok(Some(total))
}

fn condition(
    allowed: bool,
    reason: &str,
    message: String,
    old: &[Condition],
    generation: Option<i64>,
) -> Condition {
    let status = if allowed { "True" } else { "False" };
    let since = old
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed" && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(Timestamp::now()));
    Condition {
        type_: "DisruptionAllowed".into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}

pub async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if pdb.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = pdb.namespace().unwrap_or_default();
    let spec = pdb.spec.clone().unwrap_or_default();
    // policy/v1: no selector selects no pod; an empty one every pod of the namespace.
    let listed: Vec<Pod> = match &spec.selector {
        None => Vec::new(),
        Some(sel) => {
            Api::<Pod>::namespaced(ctx.client.clone(), &ns)
                .list(&list_selected(sel)?)
                .await?
                .items
        }
    };
    let pods: Vec<&Pod> = listed
        .iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    let old = pdb.status.clone().unwrap_or_default();
    let now = Timestamp::now();
    // Evictions granted whose pods are not gone yet still count as disrupted, for a while.
    let disrupted: BTreeMap<String, Time> = old
        .disrupted_pods
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, at)| {
            now.duration_since(at.0).as_secs() < DISRUPTION_TIMEOUT_SECS
                && pods
                    .iter()
                    .any(|p| p.name_any() == *name && p.metadata.deletion_timestamp.is_none())
        })
        .collect();
    let healthy = pods
        .iter()
        .filter(|p| {
            is_ready(p)
                && p.metadata.deletion_timestamp.is_none()
                && !disrupted.contains_key(&p.name_any())
        })
        .count() as i32;
    let scale = controllers_scale(&ctx.client, &ns, &pods).await?;
    let inputs = plan::Inputs {
        healthy,
        pods: pods.len() as i32,
        controllers_scale: scale,
    };
    let conds = old.conditions.clone().unwrap_or_default();
    let gen = pdb.metadata.generation;
    let status = match plan::budget(
        spec.min_available.as_ref(),
        spec.max_unavailable.as_ref(),
        &inputs,
    ) {
        Ok(b) => PodDisruptionBudgetStatus {
            current_healthy: Some(healthy),
            desired_healthy: Some(b.desired_healthy),
            expected_pods: Some(b.expected),
            disruptions_allowed: Some(b.allowed),
            disrupted_pods: (!disrupted.is_empty()).then_some(disrupted.clone()),
            observed_generation: gen,
            conditions: Some(vec![if b.allowed > 0 {
                condition(true, "SufficientPods", String::new(), &conds, gen)
            } else {
                condition(false, "InsufficientPods", String::new(), &conds, gen)
            }]),
        },
        Err(why) => {
            let events = ctx.events.reporting(COMPONENT);
            events.publish(
                pdb.as_ref(),
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                format!("Failed to calculate the number of expected pods: {why}"),
            );
            PodDisruptionBudgetStatus {
                current_healthy: Some(healthy),
                disruptions_allowed: Some(0),
                observed_generation: gen,
                conditions: Some(vec![condition(false, "SyncFailed", why, &conds, gen)]),
                ..old.clone()
            }
        }
    };
    if pdb.status.as_ref() != Some(&status) {
        // An update, not a patch: the API server's evictions change this status too, and a
        // stale count written over theirs would grant one eviction too many (a conflict retries).
        let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ns);
        let mut next = (*pdb).clone();
        next.status = Some(status);
        api.replace_status(&pdb.name_any(), &PostParams::default(), &next)
            .await?;
    }
    // Disrupted entries expire with time, not with an event.
    Ok(Action::requeue(if disrupted.is_empty() {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(10)
    }))
}
