//! The Job controller: runs pods from a Job's template until enough succeed (completions,
//! parallelism, Indexed mode), or fails the Job (backoffLimit with upstream's back-off,
//! activeDeadlineSeconds, podFailurePolicy), counting each finished pod once through the
//! job-tracking finalizer; and deletes finished Jobs after ttlSecondsAfterFinished (upstream's
//! ttl-after-finished controller). The decisions are in `plan`.

pub mod plan;
pub mod pods;
pub mod policy;

use crate::api::{delete_if_present, list_selected, patch_status};
use crate::pods::is_controlled_by;
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::JOB_TRACKING_FINALIZER;
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "job-controller";

/// Runs until SIGTERM or Ctrl-C: woken by Jobs and the pods they own.
pub async fn run(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    let orphans = tokio::spawn(orphans_every(client.clone(), Duration::from_secs(5)));
    Controller::new(Api::<Job>::all(client.clone()), cfg.clone())
        .owns(Api::<Pod>::all(client), cfg)
        .shutdown_on_signal()
        .run(reconcile, crate::error_policy, ctx.clone())
        .for_each(crate::counted(ctx.clone()))
        .await;
    orphans.abort();
}

/// Removes the job-tracking finalizer from `pod` (keeping any others).
async fn release(api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
    release_named(api, &pod.name_any(), pod.finalizers()).await
}

async fn release_named(
    api: &Api<Pod>,
    name: &str,
    finalizers: &[String],
) -> Result<(), kube::Error> {
    let rest: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != JOB_TRACKING_FINALIZER)
        .collect();
    let patch = serde_json::json!({ "metadata": { "finalizers": rest } });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(e) if !crate::is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Pods that still hold the job-tracking finalizer while their Job is gone (deleted in the
/// background, so the Job controller never saw it being deleted): as upstream, the finalizer
/// goes, or such pods would stay Terminating for ever. Returns how many were let go.
pub async fn release_orphans(client: &kube::Client) -> Result<usize, kube::Error> {
    // Pods before Jobs: a pod's Job exists before the pod, so it is in the later list.
    let pods: Api<Pod> = Api::all(client.clone());
    let held: Vec<_> = pods
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.finalizers().iter().any(|f| f == JOB_TRACKING_FINALIZER))
        .collect();
    if held.is_empty() {
        return Ok(0);
    }
    let jobs: Api<Job> = Api::all(client.clone());
    let alive: HashSet<String> = jobs
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|j| j.metadata.uid)
        .collect();
    let mut released = 0;
    for pod in held {
        let owner = crate::pods::controller_of(&pod);
        if owner.is_some_and(|o| o.kind == "Job" && alive.contains(&o.uid)) {
            continue;
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        release_named(&api, &pod.name_any(), pod.finalizers()).await?;
        tracing::info!(pod = %pod.name_any(), namespace = ?pod.namespace(), "released the job-tracking finalizer of a pod whose Job is gone");
        released += 1;
    }
    Ok(released)
}

async fn orphans_every(client: kube::Client, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = release_orphans(&client).await {
            tracing::warn!(error = %e, "releasing orphaned job pods failed");
        }
    }
}

/// The pods `job` controls, listed from the API (a lagging cache would make extra pods).
async fn owned_pods(job: &Job, api: &Api<Pod>) -> Result<Vec<Pod>, Error> {
    let uid = job.uid().unwrap_or_default();
    let Some(selector) = job.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return Err(Error::Invalid("Job has no spec.selector".into()));
    };
    Ok(api
        .list(&list_selected(selector)?)
        .await?
        .items
        .into_iter()
        .filter(|p| is_controlled_by(p, &uid))
        .collect())
}

pub async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = job.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let owned = owned_pods(&job, &pods).await?;
    if job.metadata.deletion_timestamp.is_some() {
        // A deleted Job counts nothing more: its pods may go.
        for p in owned.iter().filter(|p| pods::has_tracking_finalizer(p)) {
            release(&pods, p).await?;
        }
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let plan = plan::plan(&job, &owned, now);
    if let Some(recorded) = &plan.recorded {
        patch_status(
            &jobs,
            &job.name_any(),
            &serde_json::json!({ "status": recorded }),
        )
        .await?;
    }
    for p in owned
        .iter()
        .filter(|p| plan.release.contains(&p.name_any()))
    {
        release(&pods, p).await?;
    }
    act(&job, &ctx, &pods, &plan).await?;
    if job.status.as_ref() != Some(&plan.status) {
        let mut patch = serde_json::json!({ "status": plan.status });
        if plan.status.start_time.is_none() {
            // Suspended: startTime goes (a merge patch leaves out what is absent).
            patch["status"]["startTime"] = serde_json::Value::Null;
        }
        patch_status(&jobs, &job.name_any(), &patch).await?;
    }
    let events = ctx.events.reporting(COMPONENT);
    for (warning, reason, message) in &plan.events {
        let type_ = if *warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.publish(job.as_ref(), type_, reason, message.clone());
    }
    if plan::is_finished(job.status.as_ref().unwrap_or(&Default::default())) {
        return ttl(&job, &jobs, now).await;
    }
    let wait = plan.requeue.unwrap_or(Duration::from_secs(300));
    Ok(Action::requeue(wait.max(Duration::from_millis(200))))
}

/// Deletes and creates the plan's pods, with upstream's Events.
async fn act(job: &Job, ctx: &Ctx, pods: &Api<Pod>, plan: &plan::Plan) -> Result<(), Error> {
    let events = ctx.events.reporting(COMPONENT);
    for name in &plan.delete {
        delete_if_present(pods, name, &DeleteParams::background()).await?;
        let message = format!("Deleted pod: {name}");
        events.publish(job, EventType::Normal, "SuccessfulDelete", message);
    }
    for index in &plan.create {
        match pods
            .create(&PostParams::default(), &pods::new_pod(job, *index))
            .await
        {
            Ok(made) => {
                let message = format!("Created pod: {}", made.name_any());
                events.publish(job, EventType::Normal, "SuccessfulCreate", message);
            }
            Err(e) => {
                let message = format!("Error creating: {e}");
                events.publish(job, EventType::Warning, "FailedCreate", message);
                return Err(e.into());
            }
        }
    }
    if !plan.create.is_empty() || !plan.delete.is_empty() {
        tracing::info!(job = %job.name_any(), namespace = ?job.namespace(), created = plan.create.len(), deleted = ?plan.delete, "synced job pods");
    }
    Ok(())
}

/// ttlSecondsAfterFinished: deletes the finished Job (and, in the foreground, its pods) once
/// the time is up, as upstream's ttl-after-finished controller.
async fn ttl(job: &Job, jobs: &Api<Job>, now: Timestamp) -> Result<Action, Error> {
    match plan::ttl_left(job, now) {
        None => Ok(Action::await_change()),
        Some(left) if left.is_zero() => {
            tracing::info!(job = %job.name_any(), "deleting finished job: ttlSecondsAfterFinished");
            delete_if_present(jobs, &job.name_any(), &DeleteParams::foreground()).await?;
            Ok(Action::await_change())
        }
        Some(left) => Ok(Action::requeue(left + Duration::from_millis(100))),
    }
}
