//! The HorizontalPodAutoscaler controller (autoscaling/v2, Resource metrics with Utilization or
//! AverageValue targets): every 15 s per HPA, reads the target's scale subresource, its pods and
//! their metrics from metrics.k8s.io, and sets the replicas `plan` computes, with upstream's
//! Events (SuccessfulRescale, FailedGetResourceMetric, ...) and status conditions.

pub mod plan;
mod read;

use crate::api::patch_status;
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricStatus, MetricValueStatus, ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use plan::{Bounds, Rules};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "horizontal-pod-autoscaler";
/// --horizontal-pod-autoscaler-sync-period's default.
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);

/// The controller's memory: each HPA's recent recommendations (for the stabilization windows).
pub struct State {
    ctx: Arc<Ctx>,
    history: Mutex<HashMap<String, Vec<(Instant, i32)>>>,
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run(ctx: Arc<Ctx>) {
    let state = Arc::new(State {
        ctx: ctx.clone(),
        history: Mutex::new(HashMap::new()),
    });
    let api = Api::<HorizontalPodAutoscaler>::all(ctx.client.clone());
    Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, state)
        .for_each(crate::counted(ctx.clone()))
        .await;
}

fn error_policy(hpa: Arc<HorizontalPodAutoscaler>, e: &Error, state: Arc<State>) -> Action {
    crate::error_policy(hpa, e, state.ctx.clone());
    Action::requeue(SYNC_PERIOD)
}

fn rules(r: Option<&HPAScalingRules>, default: Rules) -> Rules {
    let Some(r) = r else { return default };
    Rules {
        window_seconds: r
            .stabilization_window_seconds
            .map_or(default.window_seconds, i64::from),
        select: r.select_policy.clone().unwrap_or(default.select),
        policies: r.policies.as_ref().map_or(default.policies, |ps| {
            ps.iter()
                .map(|p| (p.type_.clone(), p.value, p.period_seconds))
                .collect()
        }),
    }
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
) -> HorizontalPodAutoscalerCondition {
    HorizontalPodAutoscalerCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(Time(Timestamp::now())),
        observed_generation: None,
    }
}

pub async fn reconcile(
    hpa: Arc<HorizontalPodAutoscaler>,
    state: Arc<State>,
) -> Result<Action, Error> {
    if hpa.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ctx = &state.ctx;
    let ns = hpa.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", hpa.name_any());
    let events = ctx.events.reporting(COMPONENT);
    let spec = hpa.spec.clone();
    let target = read::Target::new(&ctx.client, &ns, &spec.scale_target_ref);
    let scale = match target.get_scale().await {
        Ok(s) => s,
        Err(e) => {
            let msg =
                format!("the HPA controller was unable to get the target's current scale: {e}");
            events.publish(
                hpa.as_ref(),
                EventType::Warning,
                "FailedGetScale",
                msg.clone(),
            );
            let conds = vec![condition("AbleToScale", false, "FailedGetScale", msg)];
            write_status(ctx, &hpa, None, 0, vec![], conds, None).await?;
            return Ok(Action::requeue(SYNC_PERIOD));
        }
    };
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let (min, max) = (spec.min_replicas.unwrap_or(1), spec.max_replicas);
    if current == 0 && min != 0 {
        let conds = vec![condition(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
        )];
        write_status(ctx, &hpa, Some(current), current, vec![], conds, None).await?;
        return Ok(Action::requeue(SYNC_PERIOD));
    }
    // Outside [min, max] the bound is the answer, metrics or not (upstream's order).
    if current > max || current < min {
        let (desired, why) = if current > max {
            (max, "Current number of replicas above Spec.MaxReplicas")
        } else {
            (min, "Current number of replicas below Spec.MinReplicas")
        };
        target.set_replicas(scale.clone(), desired).await?;
        let message = format!("New size: {desired}; reason: {why}");
        events.publish(
            hpa.as_ref(),
            EventType::Normal,
            "SuccessfulRescale",
            message,
        );
        let conds = vec![condition(
            "AbleToScale",
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        )];
        write_status(
            ctx,
            &hpa,
            Some(current),
            desired,
            vec![],
            conds,
            Some(Time(Timestamp::now())),
        )
        .await?;
        return Ok(Action::requeue(SYNC_PERIOD));
    }
    let selector = scale
        .status
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default();
    let measured = read::recommend(&ctx.client, &ns, &selector, current, &spec).await;
    let (recommended, metrics, reason) = match measured {
        Ok(m) => m,
        Err((reason, msg)) => {
            events.publish(hpa.as_ref(), EventType::Warning, reason, msg.clone());
            let conds = vec![
                condition(
                    "AbleToScale",
                    true,
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale".into(),
                ),
                condition("ScalingActive", false, reason, msg),
            ];
            write_status(ctx, &hpa, Some(current), current, vec![], conds, None).await?;
            return Ok(Action::requeue(SYNC_PERIOD));
        }
    };
    let behavior = spec.behavior.as_ref();
    let up = rules(
        behavior.and_then(|b| b.scale_up.as_ref()),
        Rules::default_up(),
    );
    let down = rules(
        behavior.and_then(|b| b.scale_down.as_ref()),
        Rules::default_down(),
    );
    let now = Instant::now();
    let desired_limit = {
        let mut history = state.history.lock().unwrap_or_else(|p| p.into_inner());
        let recs = history.entry(key).or_default();
        let keep = up.window_seconds.max(down.window_seconds);
        recs.retain(|(t, _)| now.duration_since(*t).as_secs() as i64 <= keep);
        let ages: Vec<(i64, i32)> = recs
            .iter()
            .map(|(t, r)| (now.duration_since(*t).as_secs() as i64, *r))
            .collect();
        let b = Bounds {
            current,
            min,
            max,
            up: &up,
            down: &down,
            history: &ages,
        };
        let out = plan::normalize(recommended, &b);
        recs.push((now, recommended));
        out
    };
    let (desired, limited) = desired_limit;
    let mut last_scale = hpa.status.as_ref().and_then(|s| s.last_scale_time.clone());
    if desired != current {
        target.set_replicas(scale.clone(), desired).await?;
        last_scale = Some(Time(Timestamp::now()));
        let message = format!("New size: {desired}; reason: {reason}");
        events.publish(
            hpa.as_ref(),
            EventType::Normal,
            "SuccessfulRescale",
            message,
        );
    }
    let conds = vec![
        condition(
            "AbleToScale",
            true,
            "ReadyForNewScale",
            "recommended size matches current size".into(),
        ),
        condition(
            "ScalingActive",
            true,
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from resource metrics"
                .into(),
        ),
        match limited {
            Some(why) => condition(
                "ScalingLimited",
                true,
                why,
                format!("the desired replica count was limited ({why})"),
            ),
            None => condition(
                "ScalingLimited",
                false,
                "DesiredWithinRange",
                "the desired count is within the acceptable range".into(),
            ),
        },
    ];
    write_status(
        ctx,
        &hpa,
        Some(current),
        desired,
        metrics,
        conds,
        last_scale,
    )
    .await?;
    Ok(Action::requeue(SYNC_PERIOD))
}

/// A Resource metric's status line (what `kubectl get hpa` shows in TARGETS).
pub fn resource_status(name: &str, utilization: Option<i32>, average: Quantity) -> MetricStatus {
    MetricStatus {
        type_: "Resource".into(),
        resource: Some(ResourceMetricStatus {
            name: name.into(),
            current: MetricValueStatus {
                average_utilization: utilization,
                average_value: Some(average),
                value: None,
            },
        }),
        ..Default::default()
    }
}

async fn write_status(
    ctx: &Ctx,
    hpa: &HorizontalPodAutoscaler,
    current: Option<i32>,
    desired: i32,
    metrics: Vec<MetricStatus>,
    mut conditions: Vec<HorizontalPodAutoscalerCondition>,
    last_scale_time: Option<Time>,
) -> Result<(), Error> {
    // A condition keeps its transition time while its status does not change.
    let old = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    for c in &mut conditions {
        if let Some(o) = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
    let status = HorizontalPodAutoscalerStatus {
        current_replicas: current,
        desired_replicas: desired,
        current_metrics: (!metrics.is_empty()).then_some(metrics),
        conditions: Some(conditions),
        last_scale_time,
        observed_generation: hpa.metadata.generation,
    };
    if hpa.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<HorizontalPodAutoscaler> =
        Api::namespaced(ctx.client.clone(), &hpa.namespace().unwrap_or_default());
    patch_status(
        &api,
        &hpa.name_any(),
        &serde_json::json!({ "status": status }),
    )
    .await?;
    Ok(())
}
