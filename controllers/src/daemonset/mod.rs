//! The DaemonSet controller: one pod per eligible node (`pod`), old pods rolled within
//! maxUnavailable, and the status `kubectl rollout status ds/x` reads (`plan`).

pub mod plan;
pub mod pod;

use crate::api::{delete_if_present, list_selected, patch_status};
use crate::pods::is_controlled_by;
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use keelson_daemon::{reflect, Changes, Objects};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

pub const COMPONENT: &str = "daemonset-controller";

pub struct Context {
    pub ctx: Arc<Ctx>,
    pub nodes: Objects<Node>,
}

/// Runs until SIGTERM or Ctrl-C: woken by DaemonSets, the pods they own, and any Node change.
pub async fn run(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    // Node changes wake every DaemonSet from this store's own watch: with a second watch as
    // the trigger, a pass could run before this store had the new node, then wait 5 minutes.
    let node_changes = Changes::default();
    let nodes = reflect(Api::all(client.clone()), cfg.clone(), &node_changes);
    // With no nodes listed yet every pod would look like one on a deleted node.
    nodes.synced().await;
    let controller = Controller::new(Api::<DaemonSet>::all(client.clone()), cfg.clone());
    let cx = Arc::new(Context { ctx, nodes });
    let node_changed = futures::stream::unfold(node_changes, |c| async move {
        c.changed().await;
        Some(((), c))
    });
    controller
        .owns(Api::<Pod>::all(client.clone()), cfg)
        .reconcile_all_on(node_changed)
        .shutdown_on_signal()
        .run(reconcile, error_policy, cx.clone())
        .for_each(|_| {
            cx.ctx.metrics.reconciles.inc();
            futures::future::ready(())
        })
        .await;
}

fn error_policy(ds: Arc<DaemonSet>, e: &Error, cx: Arc<Context>) -> Action {
    cx.ctx.metrics.errors.inc();
    tracing::warn!(daemonset = %ds.name_any(), namespace = ?ds.namespace(), error = %e, "reconcile failed; retrying in 2 s");
    Action::requeue(Duration::from_secs(2))
}

pub async fn reconcile(ds: Arc<DaemonSet>, cx: Arc<Context>) -> Result<Action, Error> {
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let client = &cx.ctx.client;
    let ns = ds.namespace().unwrap_or_default();
    let uid = ds.uid().unwrap_or_default();
    let selector = &ds.spec.selector;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Listed from the API rather than the watch cache: a cache that has not yet seen the pod
    // made on the previous pass would make a second pod for the same node.
    let owned: Vec<Pod> = pods
        .list(&list_selected(selector)?)
        .await?
        .items
        .into_iter()
        .filter(|p| is_controlled_by(p, &uid))
        .collect();
    let nodes = cx.nodes.state();
    let node_refs: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
    let inputs = plan::Inputs::new(&ds, Timestamp::now());
    let plan = plan::plan(&inputs, &node_refs, &owned);
    for node in &plan.create {
        let pod = pod::new_pod(&ds, &inputs.spec, &inputs.hash, node);
        let made = pods.create(&PostParams::default(), &pod).await?;
        let message = format!("Created pod: {}", made.name_any());
        cx.ctx.events.reporting(COMPONENT).publish(
            ds.as_ref(),
            EventType::Normal,
            "SuccessfulCreate",
            message,
        );
    }
    for name in &plan.delete {
        delete_if_present(&pods, name, &DeleteParams::default()).await?;
        let message = format!("Deleted pod: {name}");
        cx.ctx.events.reporting(COMPONENT).publish(
            ds.as_ref(),
            EventType::Normal,
            "SuccessfulDelete",
            message,
        );
    }
    if !plan.create.is_empty() || !plan.delete.is_empty() {
        tracing::info!(daemonset = %ds.name_any(), namespace = %ns, created = ?plan.create, deleted = ?plan.delete, "synced daemon pods");
    }
    if ds.status.as_ref() != Some(&plan.status) {
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), &ns);
        patch_status(
            &api,
            &ds.name_any(),
            &serde_json::json!({ "status": plan.status }),
        )
        .await?;
    }
    // Ready pods wait out minReadySeconds before they count as available: look again soon.
    let waiting = plan.status.number_ready > plan.status.number_available.unwrap_or(0);
    Ok(Action::requeue(Duration::from_secs(if waiting {
        1
    } else {
        300
    })))
}
