//! PodSecurity admission, as upstream's built-in plugin: a namespace's
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels pick a Pod Security
//! Standard (privileged, baseline, restricted). A Pod that violates the enforce level is
//! refused with upstream's message; violations of the warn level come back as `Warning:`
//! headers, for Pods and for the pod templates of workloads (which are never refused, as
//! upstream). Nothing is exempt. The audit label is read and checked like the others; its
//! findings have no audit annotations to go to (the audit log is at level Metadata).

pub mod checks;
mod namespace;

use super::Api;
use crate::object;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use checks::Finding;
use keelson_apimachinery::well_known::{
    POD_SECURITY_AUDIT_LABEL, POD_SECURITY_AUDIT_VERSION_LABEL, POD_SECURITY_ENFORCE_LABEL,
    POD_SECURITY_ENFORCE_VERSION_LABEL, POD_SECURITY_WARN_LABEL, POD_SECURITY_WARN_VERSION_LABEL,
};
use serde_json::{Map, Value};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Upstream fails closed: a level it cannot read is restricted.
    fn parse(s: &str) -> Result<Level, Level> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(Level::Restricted),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A level at a version of the standards: `restricted:latest`, `baseline:v1.25`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelVersion {
    pub level: Level,
    /// The minor version of 1.x; None for latest.
    pub minor: Option<u32>,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.minor {
            None => write!(f, "{}:latest", self.level.as_str()),
            Some(m) => write!(f, "{}:v1.{m}", self.level.as_str()),
        }
    }
}

/// The minor version of "v1.N" (N without leading zeros); None for "latest" and for what
/// cannot be read, which upstream's ParseVersion also takes as latest.
fn parse_version(s: &str) -> Option<u32> {
    let minor = s.strip_prefix("v1.")?;
    let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
    if !digits || (minor.len() > 1 && minor.starts_with('0')) {
        return None;
    }
    minor.parse().ok()
}

/// The three modes of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Policy {
    /// The policy a namespace's labels set, as upstream's PolicyToEvaluate reads them (the
    /// defaults are privileged:latest, so nothing is checked without labels). A warn level
    /// left unset follows a stricter enforce level.
    pub fn from_labels(labels: Option<&Map<String, Value>>) -> Policy {
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let mode = |level: &str, version: &str| {
            let parsed = label(level).map(Level::parse);
            let lv = LevelVersion {
                level: match parsed {
                    Some(Ok(l)) | Some(Err(l)) => l,
                    None => Level::Privileged,
                },
                minor: label(version).and_then(parse_version),
            };
            (lv, matches!(parsed, Some(Ok(_))), label(version).is_some())
        };
        let (enforce, enforce_set, _) = mode(
            POD_SECURITY_ENFORCE_LABEL,
            POD_SECURITY_ENFORCE_VERSION_LABEL,
        );
        let (audit, _, _) = mode(POD_SECURITY_AUDIT_LABEL, POD_SECURITY_AUDIT_VERSION_LABEL);
        let (mut warn, _, warn_version_set) =
            mode(POD_SECURITY_WARN_LABEL, POD_SECURITY_WARN_VERSION_LABEL);
        let warn_set = label(POD_SECURITY_WARN_LABEL).is_some();
        if !warn_set && enforce_set && enforce.level > warn.level {
            warn.level = enforce.level;
            if !warn_version_set {
                warn.minor = enforce.minor;
            }
        }
        Policy {
            enforce,
            audit,
            warn,
        }
    }

    /// Nothing to check: every mode is privileged.
    fn is_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|m| m.level == Level::Privileged)
    }
}

/// Every finding of the pod (its metadata and spec) at `lv`, in upstream's order.
pub fn evaluate(lv: LevelVersion, meta: &Value, spec: &Value) -> Vec<Finding> {
    let minor = lv.minor.unwrap_or(u32::MAX);
    let restricted = match lv.level {
        Level::Privileged => return Vec::new(),
        Level::Baseline => false,
        Level::Restricted => true,
    };
    let baseline = checks::BASELINE
        .iter()
        .filter(|(_, replaced, _)| !(restricted && *replaced))
        .map(|(since, _, check)| (since, check));
    let more = checks::RESTRICTED
        .iter()
        .filter(|_| restricted)
        .map(|(since, check)| (since, check));
    baseline
        .chain(more)
        .filter(|(since, _)| **since <= minor)
        .filter_map(|(_, check)| check(meta, spec))
        .collect()
}

/// `reason (detail), reason (detail)` as upstream's ForbiddenDetail.
pub fn describe(findings: &[Finding]) -> String {
    let parts: Vec<String> = findings
        .iter()
        .map(|f| match f.detail.is_empty() {
            true => f.reason.clone(),
            false => format!("{} ({})", f.reason, f.detail),
        })
        .collect();
    parts.join(", ")
}

/// The namespace's policy; None when it does not exist or sets nothing.
fn namespace_policy(api: &Api, ns: &str) -> Option<Policy> {
    let nsres = crate::resources::lookup("", "v1", "namespaces")?;
    let entry = api.store.get(&nsres.key("", ns))?;
    let policy = Policy::from_labels(object::labels(&entry.obj));
    (!policy.is_privileged()).then_some(policy)
}

/// Refuses a new Pod that violates its namespace's enforce level, and a Namespace whose
/// PodSecurity labels cannot be read. `name` is the name the request gave (empty with
/// generateName), as upstream's message shows it.
pub fn enforce_create(
    api: &Api,
    res: &Resource,
    ns: &str,
    name: &str,
    obj: &Value,
) -> ApiResult<()> {
    if res.kind == "Namespace" {
        return namespace::check_labels(None, obj);
    }
    if res.kind != "Pod" {
        return Ok(());
    }
    let Some(policy) = namespace_policy(api, ns) else {
        return Ok(());
    };
    check_enforce(&policy, res, name, obj)
}

/// Refuses a Namespace update that makes its labels unreadable, and an update of a Pod whose
/// images changed when the new Pod violates the enforce level; other updates of a Pod's spec
/// cannot loosen its security (upstream's isSignificantPodUpdate).
pub fn enforce_update(api: &Api, res: &Resource, old: &Value, new: &Value) -> ApiResult<()> {
    if res.kind == "Namespace" {
        return namespace::check_labels(Some(old), new);
    }
    if res.kind != "Pod" || images(old) == images(new) {
        return Ok(());
    }
    let Some(policy) = namespace_policy(api, object::namespace(new)) else {
        return Ok(());
    };
    check_enforce(&policy, res, object::name(new), new)
}

fn images(pod: &Value) -> Vec<Option<&Value>> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_array))
        .flatten()
        .map(|c| c.get("image"))
        .collect()
}

fn check_enforce(policy: &Policy, res: &Resource, name: &str, pod: &Value) -> ApiResult<()> {
    let meta = pod.get("metadata").unwrap_or(&Value::Null);
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let findings = evaluate(policy.enforce, meta, spec);
    if findings.is_empty() {
        return Ok(());
    }
    let message = format!(
        "{} \"{name}\" is forbidden: violates PodSecurity \"{}\": {}",
        res.plural,
        policy.enforce,
        describe(&findings)
    );
    Err(ApiError::forbidden(
        message,
        Some((res.group, res.plural, name)),
    ))
}

/// Where a kind holds its pod: "" for a Pod itself, a JSON pointer to a workload's pod
/// template (the kinds upstream checks), None for kinds without one.
fn template_path(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some(""),
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => Some("/spec/template"),
        "CronJob" => Some("/spec/jobTemplate/spec/template"),
        "PodTemplate" => Some("/template"),
        _ => None,
    }
}

fn pod_part<'a>(kind: &str, obj: &'a Value) -> Option<&'a Value> {
    obj.pointer(template_path(kind)?)
}

/// Whether PodSecurity may warn about a write of `kind` (a pod spec, or a namespace's labels).
pub fn has_pod_template(kind: &str) -> bool {
    kind == "Namespace" || template_path(kind).is_some()
}

/// What PodSecurity says about a written object, beside letting it through.
#[derive(Debug, Default, PartialEq)]
pub struct Review {
    /// `Warning:` texts: the warn level's findings, or the pods a new enforce level refuses.
    pub warnings: Vec<String>,
    /// Audit annotations, as upstream's: the enforce level a Pod passed, and the audit level's
    /// findings.
    pub annotations: Vec<(&'static str, String)>,
}

/// The review of a written object: a Pod, a workload's pod template when it is new or changed
/// (`old`), or a namespace whose enforce level changed.
pub fn review(api: &Api, res: &Resource, old: Option<&Value>, new: &Value) -> Review {
    if res.kind == "Namespace" {
        let warnings = old.map_or_else(Vec::new, |o| namespace::existing_pods(api, o, new));
        return Review {
            warnings,
            annotations: Vec::new(),
        };
    }
    let Some(pod) = pod_part(res.kind, new) else {
        return Review::default();
    };
    let unchanged = old.and_then(|o| pod_part(res.kind, o)) == Some(pod);
    // A Pod's updates are checked only when they could loosen it (enforce_update).
    if unchanged || (res.kind == "Pod" && old.is_some_and(|o| images(o) == images(new))) {
        return Review::default();
    }
    let Some(policy) = namespace_policy(api, object::namespace(new)) else {
        return Review::default();
    };
    let meta = pod.get("metadata").unwrap_or(&Value::Null);
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let violates = |lv: LevelVersion| {
        let findings = evaluate(lv, meta, spec);
        (!findings.is_empty()).then(|| {
            format!(
                "would violate PodSecurity \"{lv}\": {}",
                describe(&findings)
            )
        })
    };
    let mut annotations = Vec::new();
    if res.kind == "Pod" {
        annotations.push((ENFORCE_POLICY_ANNOTATION, policy.enforce.to_string()));
    }
    if let Some(v) = violates(policy.audit) {
        annotations.push((AUDIT_VIOLATIONS_ANNOTATION, v));
    }
    Review {
        warnings: violates(policy.warn).into_iter().collect(),
        annotations,
    }
}

/// Audit annotations upstream's plugin sets (audit events only; never on objects).
const ENFORCE_POLICY_ANNOTATION: &str = "pod-security.kubernetes.io/enforce-policy";
const AUDIT_VIOLATIONS_ANNOTATION: &str = "pod-security.kubernetes.io/audit-violations";

#[cfg(test)]
mod tests;
