//! PodSecurity on Namespaces, as upstream: its labels must be readable (422 otherwise, on create
//! and when an update changes what is wrong), and a new enforce level is tried on the pods the
//! namespace already has, whose violations come back as warnings (nothing is evicted).

use super::{evaluate, Level, Policy};
use crate::object;
use crate::rest::Api;
use crate::status::{ApiError, ApiResult};
use keelson_apimachinery::well_known::{
    POD_SECURITY_AUDIT_LABEL, POD_SECURITY_AUDIT_VERSION_LABEL, POD_SECURITY_ENFORCE_LABEL,
    POD_SECURITY_ENFORCE_VERSION_LABEL, POD_SECURITY_WARN_LABEL, POD_SECURITY_WARN_VERSION_LABEL,
};
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Most pods a new enforce level is tried on, as upstream.
const MAX_PODS_TO_CHECK: usize = 3000;

/// What is wrong with the PodSecurity labels of a namespace, as upstream words it.
pub fn label_errors(ns: &Value) -> Vec<Cause> {
    let labels = object::labels(ns);
    let mut causes = Vec::new();
    let levels = [
        POD_SECURITY_ENFORCE_LABEL,
        POD_SECURITY_AUDIT_LABEL,
        POD_SECURITY_WARN_LABEL,
    ];
    let versions = [
        POD_SECURITY_ENFORCE_VERSION_LABEL,
        POD_SECURITY_AUDIT_VERSION_LABEL,
        POD_SECURITY_WARN_VERSION_LABEL,
    ];
    for (key, is_level) in levels
        .iter()
        .map(|k| (k, true))
        .chain(versions.iter().map(|k| (k, false)))
    {
        let Some(value) = labels.and_then(|l| l.get(*key)).and_then(Value::as_str) else {
            continue;
        };
        let ok = match is_level {
            true => Level::parse(value).is_ok(),
            false => value == "latest" || super::parse_version(value).is_some(),
        };
        if !ok {
            let detail = match is_level {
                true => "must be one of privileged, baseline, restricted",
                false => "must be \"latest\" or \"v1.x\"",
            };
            let field = format!("metadata.labels[{key}]");
            causes.push(Cause::invalid(field, &json!(value), detail));
        }
    }
    causes
}

/// 422 for unreadable labels on a new namespace, or on an update that changes what is wrong.
pub fn check_labels(old: Option<&Value>, new: &Value) -> ApiResult<()> {
    let errors = label_errors(new);
    if errors.is_empty() || old.is_some_and(|o| label_errors(o) == errors) {
        return Ok(());
    }
    let name = object::name(new);
    Err(ApiError::invalid("Namespace", "", name, &errors))
}

/// The warnings for an update that changes a namespace's enforce level: the pods already in it
/// that the new level would refuse, grouped by what they violate.
pub fn existing_pods(api: &Api, old: &Value, new: &Value) -> Vec<String> {
    let before = Policy::from_labels(object::labels(old)).enforce;
    let after = Policy::from_labels(object::labels(new)).enforce;
    if before == after || after.level == Level::Privileged {
        return Vec::new();
    }
    let Some(pods) = crate::resources::lookup("", "v1", "pods") else {
        return Vec::new();
    };
    let ns = object::name(new);
    let (entries, _) = api.store.list(&format!("{}{ns}/", pods.key_prefix()));
    let total = entries.len();
    // reasons -> (first pod name, how many pods)
    let mut groups: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for e in entries.iter().take(MAX_PODS_TO_CHECK) {
        let meta = e.obj.get("metadata").unwrap_or(&Value::Null);
        let spec = e.obj.get("spec").unwrap_or(&Value::Null);
        let reasons: Vec<String> = evaluate(after, meta, spec)
            .into_iter()
            .map(|f| f.reason)
            .collect();
        if reasons.is_empty() {
            continue;
        }
        let name = object::name(&e.obj).to_string();
        let group = groups
            .entry(reasons.join(", "))
            .or_insert((name.clone(), 0));
        group.0 = group.0.clone().min(name);
        group.1 += 1;
    }
    let mut warnings = Vec::new();
    let checked = total.min(MAX_PODS_TO_CHECK);
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !groups.is_empty() {
        warnings.push(format!(
            "existing pods in namespace \"{ns}\" violate the new PodSecurity enforce level \"{after}\""
        ));
    }
    let mut pods: Vec<String> = groups
        .into_iter()
        .map(|(reasons, (first, count))| match count {
            1 => format!("{first}: {reasons}"),
            2 => format!("{first} (and 1 other pod): {reasons}"),
            n => format!("{first} (and {} other pods): {reasons}", n - 1),
        })
        .collect();
    pods.sort();
    warnings.extend(pods);
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_labels_are_named_as_upstream_does() {
        let ns = json!({"metadata": {"name": "x", "labels": {
            "pod-security.kubernetes.io/enforce": "strict",
            "pod-security.kubernetes.io/warn-version": "v1.05",
            "pod-security.kubernetes.io/audit": "baseline",
            "pod-security.kubernetes.io/audit-version": "v1.30"
        }}});
        let messages: Vec<String> = label_errors(&ns)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"v1.05\": must be \"latest\" or \"v1.x\"",
            ]
        );
        // An update that leaves the same errors alone is let through.
        assert!(check_labels(Some(&ns), &ns).is_ok());
        assert_eq!(check_labels(None, &ns).unwrap_err().code, 422);
    }
}
