//! The CronJob controller: makes a Job from the jobTemplate at each scheduled time (standard
//! cron syntax in spec.timeZone), as upstream's cronjob controller v2. The decisions are in
//! `plan`.

pub mod plan;

use crate::api::{delete_if_present, patch_status};
use crate::pods::is_controlled_by;
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "cronjob-controller";

/// Runs until SIGTERM or Ctrl-C: woken by CronJobs, the Jobs they own, and their schedules.
pub async fn run(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    Controller::new(Api::<CronJob>::all(client.clone()), cfg.clone())
        .owns(Api::<Job>::all(client), cfg)
        .shutdown_on_signal()
        .run(reconcile, crate::error_policy, ctx.clone())
        .for_each(crate::counted(ctx.clone()))
        .await;
}

pub async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if cj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = cj.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = cj.uid().unwrap_or_default();
    // Listed from the API: a lagging cache would not show the Job made a moment ago.
    let owned: Vec<Job> = jobs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| is_controlled_by(j, &uid))
        .collect();
    let mut plan = plan::plan(&cj, &owned, Timestamp::now());
    let events = ctx.events.reporting(COMPONENT);
    for name in &plan.delete {
        delete_if_present(&jobs, name, &DeleteParams::background()).await?;
    }
    if let Some(job) = &plan.create {
        match jobs.create(&PostParams::default(), job).await {
            Ok(made) => {
                let message = format!("Created job {}", made.name_any());
                events.publish(cj.as_ref(), EventType::Normal, "SuccessfulCreate", message);
                let active = plan.status.active.get_or_insert_with(Vec::new);
                active.push(plan::job_ref(&made));
            }
            // Not one of ours (those were listed): someone else made it and answers for it.
            Err(kube::Error::Api(e)) if e.is_already_exists() => {
                tracing::info!(cronjob = %cj.name_any(), job = %job.name_any(), "job already exists");
            }
            Err(e) => {
                let message = format!("Error creating job: {e}");
                events.publish(cj.as_ref(), EventType::Warning, "FailedCreate", message);
                return Err(e.into());
            }
        }
    }
    for (warning, reason, message) in &plan.events {
        let type_ = if *warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.publish(cj.as_ref(), type_, reason, message.clone());
    }
    if cj.status.as_ref() != Some(&plan.status) {
        let api: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = serde_json::json!({ "status": plan.status });
        patch_status(&api, &cj.name_any(), &patch).await?;
    }
    let wait = plan.requeue.unwrap_or(Duration::from_secs(300));
    Ok(Action::requeue(wait))
}
