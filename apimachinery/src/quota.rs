//! ResourceQuota's arithmetic, shared by the API server's admission (which charges a new object
//! to the quotas of its namespace) and the controller that recounts `status.used`: what one
//! object uses of each resource name a quota can limit, and which quotas a Pod falls under.

use crate::quantity;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Amounts per resource name, in milli-units (a count of 1 is 1000).
pub type Usage = BTreeMap<String, i128>;

const ONE: i128 = 1000;

/// Kinds whose plain plural is also a quota name ("pods", "services", ...), as upstream's
/// legacy object-count names.
const LEGACY_COUNTS: &[&str] = &[
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
];

/// The compute names a pod-level quota can hold, each with where a container says it.
const COMPUTE: &[(&str, &str, &str)] = &[
    ("requests.cpu", "requests", "cpu"),
    ("cpu", "requests", "cpu"),
    ("requests.memory", "requests", "memory"),
    ("memory", "requests", "memory"),
    (
        "requests.ephemeral-storage",
        "requests",
        "ephemeral-storage",
    ),
    ("ephemeral-storage", "requests", "ephemeral-storage"),
    ("limits.cpu", "limits", "cpu"),
    ("limits.memory", "limits", "memory"),
    ("limits.ephemeral-storage", "limits", "ephemeral-storage"),
];

/// Whether a quota name counts objects (whole numbers): the legacy plain names, the Service
/// port and balancer counts, and count/<resource>.
pub fn is_object_count(name: &str) -> bool {
    name.starts_with("count/")
        || LEGACY_COUNTS.contains(&name)
        || matches!(name, "services.nodeports" | "services.loadbalancers")
}

/// What `obj`, of the collection `plural` in `group`, uses of every name a quota can limit.
pub fn usage(group: &str, plural: &str, obj: &Value) -> Usage {
    let mut u = Usage::new();
    if group.is_empty() && plural == "pods" && is_terminal(obj) {
        // A finished pod holds no resources (upstream's QuotaV1Pod).
        return u;
    }
    let count = if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    };
    u.insert(count, ONE);
    if group.is_empty() && LEGACY_COUNTS.contains(&plural) {
        u.insert(plural.to_string(), ONE);
    }
    match (group, plural) {
        ("", "pods") => pod_compute(obj, &mut u),
        ("", "services") => service_usage(obj, &mut u),
        ("", "persistentvolumeclaims") => {
            if let Some(q) = obj
                .pointer("/spec/resources/requests/storage")
                .and_then(Value::as_str)
                .and_then(quantity::parse_milli)
            {
                u.insert("requests.storage".into(), q);
            }
        }
        _ => {}
    }
    u
}

/// Succeeded and Failed pods no longer count.
pub fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// A container's `resources.<kind>.<name>` in milli-units.
fn container_amount(c: &Value, kind: &str, name: &str) -> Option<i128> {
    c.get("resources")
        .and_then(|r| r.get(kind))
        .and_then(|m| m.get(name))
        .and_then(Value::as_str)
        .and_then(quantity::parse_milli)
}

fn containers<'a>(pod: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    pod.pointer(&format!("/spec/{key}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Upstream's PodRequests/PodLimits: the containers' sum, raised to any one init container's
/// amount (init containers run one at a time, before the others).
fn pod_amount(pod: &Value, kind: &str, name: &str) -> Option<i128> {
    let sum = containers(pod, "containers")
        .filter_map(|c| container_amount(c, kind, name))
        .reduce(|a, b| a + b);
    let init = containers(pod, "initContainers")
        .filter_map(|c| container_amount(c, kind, name))
        .max();
    match (sum, init) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn pod_compute(pod: &Value, u: &mut Usage) {
    for (quota_name, kind, name) in COMPUTE {
        if let Some(q) = pod_amount(pod, kind, name) {
            u.insert(quota_name.to_string(), q);
        }
    }
    // Extended resources (GPUs and the like) are quota'd by their requests only.
    let mut extended: Vec<String> = containers(pod, "containers")
        .chain(containers(pod, "initContainers"))
        .filter_map(|c| c.pointer("/resources/requests").and_then(Value::as_object))
        .flat_map(|m| m.keys().filter(|k| k.contains('/')).cloned())
        .collect();
    extended.sort();
    extended.dedup();
    for name in extended {
        if let Some(q) = pod_amount(pod, "requests", &name) {
            u.insert(format!("requests.{name}"), q);
        }
    }
}

fn service_usage(svc: &Value, u: &mut Usage) {
    let kind = svc.pointer("/spec/type").and_then(Value::as_str);
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(0, Vec::len) as i128;
    match kind {
        Some("NodePort") => {
            u.insert("services.nodeports".into(), ports * ONE);
        }
        Some("LoadBalancer") => {
            u.insert("services.loadbalancers".into(), ONE);
            u.insert("services.nodeports".into(), ports * ONE);
        }
        _ => {}
    }
}

/// Whether memory-like: printed with binary suffixes.
fn is_binary(resource: &str) -> bool {
    resource.ends_with("memory") || resource.ends_with("storage")
}

/// An amount as status.used and the error messages print it.
pub fn format(resource: &str, milli: i128) -> String {
    quantity::format_milli(milli, is_binary(resource))
}

/// Upstream's GetPodQOS, over cpu and memory: the scopes BestEffort and NotBestEffort.
pub fn is_best_effort(pod: &Value) -> bool {
    containers(pod, "containers")
        .chain(containers(pod, "initContainers"))
        .all(|c| {
            ["requests", "limits"].iter().all(|kind| {
                ["cpu", "memory"]
                    .iter()
                    .all(|name| container_amount(c, kind, name).unwrap_or(0) == 0)
            })
        })
}

/// Whether a pod falls under one quota scope (upstream's podMatchesScopeFunc).
fn pod_in_scope(scope: &str, pod: &Value, selector: Option<&Value>) -> bool {
    let terminating = pod
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    match scope {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "PriorityClass" => {
            let class = pod
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str);
            selector.is_none_or(|req| priority_class_matches(req, class))
        }
        "CrossNamespacePodAffinity" => false,
        _ => false,
    }
}

/// One scopeSelector requirement on the PriorityClass scope.
fn priority_class_matches(req: &Value, class: Option<&str>) -> bool {
    let values: Vec<&str> = req
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let class = class.filter(|c| !c.is_empty());
    match req.get("operator").and_then(Value::as_str) {
        Some("In") => class.is_some_and(|c| values.contains(&c)),
        Some("NotIn") => class.is_none_or(|c| !values.contains(&c)),
        Some("Exists") => class.is_some(),
        Some("DoesNotExist") => class.is_none(),
        _ => false,
    }
}

/// Whether `quota` charges `obj`: a quota with scopes only charges the pods they select.
pub fn applies(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    let spec = quota.get("spec");
    let scopes: Vec<&str> = spec
        .and_then(|s| s.get("scopes"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let selected: Vec<&Value> = spec
        .and_then(|s| s.pointer("/scopeSelector/matchExpressions"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    if scopes.is_empty() && selected.is_empty() {
        return true;
    }
    if !(group.is_empty() && plural == "pods") {
        return false;
    }
    scopes.iter().all(|s| pod_in_scope(s, obj, None))
        && selected.iter().all(|req| {
            let scope = req.get("scopeName").and_then(Value::as_str).unwrap_or("");
            pod_in_scope(scope, obj, Some(req))
        })
}

/// Upstream's "must specify" check: for each compute name the quota limits, the pod's
/// containers that do not say it ("requests.cpu" -> ["app"]). Sorted by name.
pub fn unspecified(hard: &Map<String, Value>, pod: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (quota_name, kind, name) in COMPUTE {
        if !hard.contains_key(*quota_name) {
            continue;
        }
        let missing: Vec<String> = containers(pod, "containers")
            .filter(|c| container_amount(c, kind, name).is_none())
            .map(|c| {
                c.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        if !missing.is_empty() {
            out.push((quota_name.to_string(), missing));
        }
    }
    out.sort();
    out
}

/// A ResourceList (`{"cpu": "1"}`) in milli-units; entries that are not quantities are left out.
pub fn parse_list(list: Option<&Value>) -> Usage {
    list.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let q = match v {
                Value::String(s) => quantity::parse_milli(s),
                Value::Number(n) => n.as_i64().map(|n| i128::from(n) * ONE),
                _ => None,
            };
            q.map(|q| (k.clone(), q))
        })
        .collect()
}

/// A usage as a ResourceList.
pub fn to_list(u: &Usage) -> Map<String, Value> {
    u.iter()
        .map(|(k, v)| (k.clone(), Value::String(format(k, *v))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value) -> Value {
        json!({"spec": {"containers": containers}, "status": {"phase": "Running"}})
    }

    #[test]
    fn a_pod_uses_its_containers_sum_and_its_largest_init_container() {
        let mut p = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
        ]));
        p["spec"]["initContainers"] =
            json!([{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}]);
        let u = usage("", "pods", &p);
        assert_eq!(u["pods"], 1000);
        assert_eq!(u["count/pods"], 1000);
        assert_eq!(format("requests.cpu", u["requests.cpu"]), "350m");
        assert_eq!(format("cpu", u["cpu"]), "350m");
        assert_eq!(format("requests.memory", u["requests.memory"]), "1Gi");
        assert_eq!(format("limits.cpu", u["limits.cpu"]), "200m");
        assert!(!u.contains_key("limits.memory"));
    }

    #[test]
    fn finished_pods_use_nothing() {
        let mut p = pod(json!([{"name": "a"}]));
        p["status"]["phase"] = json!("Succeeded");
        assert!(usage("", "pods", &p).is_empty());
    }

    #[test]
    fn object_counts_name_the_group() {
        let u = usage("apps", "deployments", &json!({}));
        assert_eq!(u.keys().collect::<Vec<_>>(), ["count/deployments.apps"]);
        let svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 1}, {"port": 2}]}});
        let u = usage("", "services", &svc);
        assert_eq!((u["services"], u["services.nodeports"]), (1000, 2000));
        let pvc = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
        assert_eq!(
            format(
                "requests.storage",
                usage("", "persistentvolumeclaims", &pvc)["requests.storage"]
            ),
            "2Gi"
        );
    }

    #[test]
    fn scopes_select_pods() {
        let best_effort = pod(json!([{"name": "a"}]));
        let burstable = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
        let q = json!({"spec": {"scopes": ["BestEffort"]}});
        assert!(applies(&q, "", "pods", &best_effort));
        assert!(!applies(&q, "", "pods", &burstable));
        assert!(!applies(&q, "", "services", &json!({})));
        let mut high = burstable.clone();
        high["spec"]["priorityClassName"] = json!("high");
        let q = json!({"spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        assert!(applies(&q, "", "pods", &high));
        assert!(!applies(&q, "", "pods", &burstable));
        assert!(applies(&json!({"spec": {}}), "", "services", &json!({})));
    }

    #[test]
    fn compute_quotas_need_every_container_to_say_its_amount() {
        let hard = json!({"requests.cpu": "1", "limits.memory": "1Gi", "pods": "3"});
        let p = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b"},
        ]));
        let missing = unspecified(hard.as_object().unwrap(), &p);
        assert_eq!(
            missing,
            vec![
                (
                    "limits.memory".to_string(),
                    vec!["a".to_string(), "b".to_string()]
                ),
                ("requests.cpu".to_string(), vec!["b".to_string()]),
            ]
        );
    }
}
