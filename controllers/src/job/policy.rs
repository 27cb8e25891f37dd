//! spec.podFailurePolicy: the first rule that matches a failed pod decides whether the failure
//! fails the Job at once (FailJob), is not counted (Ignore), or counts toward backoffLimit
//! (Count, and FailIndex, which without backoffLimitPerIndex counts too). Pure.

use k8s_openapi::api::batch::v1::{
    Job, PodFailurePolicyOnExitCodesRequirement as OnExitCodes, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The Job fails now; the message is upstream's.
    FailJob(String),
    Ignore,
    Count,
}

/// What the Job's podFailurePolicy says about failed `pod`; Count when no rule matches.
pub fn action(job: &Job, pod: &Pod) -> Action {
    let rules = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let Some(why) = matches(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => Action::FailJob(format!("{why} matching FailJob rule at index {i}")),
            "Ignore" => Action::Ignore,
            _ => Action::Count,
        };
    }
    Action::Count
}

/// How the rule matched, in upstream's words; None when it does not.
fn matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let who = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    if let Some(req) = &rule.on_exit_codes {
        let status = pod.status.as_ref()?;
        let all = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten());
        let (name, code) = all.filter_map(|c| exit_code_matching(c, req)).next()?;
        return Some(format!(
            "Container {name} for pod {who} failed with exit code {code}"
        ));
    }
    let conditions = pod
        .status
        .as_ref()?
        .conditions
        .as_deref()
        .unwrap_or_default();
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let want = pattern.status.as_deref().unwrap_or("True");
        if conditions
            .iter()
            .any(|c| c.type_ == pattern.type_ && c.status == want)
        {
            return Some(format!("Pod {who} has condition {}", pattern.type_));
        }
    }
    None
}

/// A container that ended with a non-zero exit code the requirement selects (exit code 0 never
/// matches, as upstream).
fn exit_code_matching(c: &ContainerStatus, req: &OnExitCodes) -> Option<(String, i32)> {
    let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
    if code == 0 || req.container_name.as_ref().is_some_and(|n| *n != c.name) {
        return None;
    }
    let listed = req.values.contains(&code);
    let hit = match req.operator.as_str() {
        "In" => listed,
        "NotIn" => !listed,
        _ => false,
    };
    hit.then(|| (c.name.clone(), code))
}
