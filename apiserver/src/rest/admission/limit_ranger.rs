//! Upstream's LimitRanger admission for new Pods and PersistentVolumeClaims: containers get the
//! namespace's LimitRange defaults for the requests and limits they do not state (recorded in
//! the kubernetes.io/limit-ranger annotation), then every Container, Pod and claim item's
//! min, max and maxLimitRequestRatio is enforced, with upstream's messages.

use super::super::read::list_entries;
use super::super::{Api, Target};
use crate::object;
use crate::status::{ApiError, ApiResult};
use keelson_apimachinery::quantity::parse_milli;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The LimitRanges of `ns`, by name.
fn limit_ranges(api: &Api, ns: &str) -> ApiResult<Vec<Value>> {
    let Some(res) = crate::resources::lookup("", "v1", "limitranges") else {
        return Ok(Vec::new());
    };
    let all = Target {
        res,
        namespace: ns.to_string(),
        name: String::new(),
    };
    let (entries, _) = list_entries(api, &all, &Default::default())?;
    Ok(entries.iter().map(|e| (*e.obj).clone()).collect())
}

/// The items of every range of one type.
fn items<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    ranges
        .iter()
        .filter_map(|r| r.pointer("/spec/limits").and_then(Value::as_array))
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

/// Admits a new Pod: defaults, then constraints. Returns whether it changed the pod.
pub fn admit_pod(api: &Api, ns: &str, pod: &mut Value) -> ApiResult<bool> {
    let ranges = limit_ranges(api, ns)?;
    if ranges.is_empty() {
        return Ok(false);
    }
    let changed = set_defaults(&ranges, pod);
    let errors = pod_violations(&ranges, pod);
    refuse(errors, "pods", pod)?;
    Ok(changed)
}

/// Admits a new PersistentVolumeClaim against the PersistentVolumeClaim items.
pub fn admit_claim(api: &Api, ns: &str, pvc: &Value) -> ApiResult<()> {
    let ranges = limit_ranges(api, ns)?;
    let requests = amounts(pvc.pointer("/spec/resources/requests"));
    let mut errors = Vec::new();
    for item in items(&ranges, "PersistentVolumeClaim") {
        for (name, min) in amounts(item.get("min")) {
            min_check(
                "PersistentVolumeClaim",
                &name,
                &min,
                &requests,
                &BTreeMap::new(),
                &mut errors,
            );
        }
        for (name, max) in amounts(item.get("max")) {
            match requests.get(&name) {
                None => errors.push(format!("maximum {name} usage per PersistentVolumeClaim is {}.  No request is specified", max.0)),
                Some(r) if r.1 > max.1 => errors.push(format!("maximum {name} usage per PersistentVolumeClaim is {}, but request is {}", max.0, r.0)),
                Some(_) => {}
            }
        }
    }
    refuse(errors, "persistentvolumeclaims", pvc)
}

/// Upstream's aggregate: one error as is, several in brackets.
fn refuse(errors: Vec<String>, plural: &str, obj: &Value) -> ApiResult<()> {
    let name = object::name(obj);
    let why = match errors.as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::forbidden(
        format!("{plural} \"{name}\" is forbidden: {why}"),
        Some(("", plural, name)),
    ))
}

/// A ResourceList as (text as written, milli-units) per resource.
type Amounts = BTreeMap<String, (String, i128)>;

fn amounts(list: Option<&Value>) -> Amounts {
    list.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v.as_str()?;
            Some((k.clone(), (text.to_string(), parse_milli(text)?)))
        })
        .collect()
}

/// Fills each container's missing requests (defaultRequest) and limits (default) from the
/// Container items, and notes what it set in the pod's annotation.
fn set_defaults(ranges: &[Value], pod: &mut Value) -> bool {
    let (mut defaults, mut default_requests) = (Map::new(), Map::new());
    for item in items(ranges, "Container") {
        for (key, into) in [
            ("default", &mut defaults),
            ("defaultRequest", &mut default_requests),
        ] {
            for (k, v) in item
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                into.entry(k.clone()).or_insert(v.clone());
            }
        }
    }
    let mut notes = Vec::new();
    for (key, label) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        let list = pod
            .pointer_mut(&format!("/spec/{key}"))
            .and_then(Value::as_array_mut);
        for c in list.into_iter().flatten().filter_map(Value::as_object_mut) {
            default_container(c, label, (&default_requests, &defaults), &mut notes);
        }
    }
    if notes.is_empty() {
        return false;
    }
    let text = format!("LimitRanger plugin set: {}", notes.join("; "));
    object::set_path(pod, &["metadata", "annotations", ANNOTATION], json!(text));
    true
}

/// One container's missing requests and limits, noted as upstream's annotation says them.
fn default_container(
    c: &mut Map<String, Value>,
    label: &str,
    (default_requests, defaults): (&Map<String, Value>, &Map<String, Value>),
    notes: &mut Vec<String>,
) {
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let resources = c.entry("resources").or_insert_with(|| json!({}));
    let Some(resources) = resources.as_object_mut() else {
        return;
    };
    for (kind, from) in [("request", default_requests), ("limit", defaults)] {
        let field = format!("{kind}s");
        let mut set = Vec::new();
        for (k, v) in from {
            let list = resources.entry(field.as_str()).or_insert_with(|| json!({}));
            if let Some(list) = list.as_object_mut() {
                if !list.contains_key(k) {
                    list.insert(k.clone(), v.clone());
                    set.push(k.clone());
                }
            }
        }
        if !set.is_empty() {
            notes.push(format!("{} {kind} for {label} {name}", set.join(", ")));
        }
    }
}

fn min_check(
    kind: &str,
    name: &str,
    min: &(String, i128),
    req: &Amounts,
    lim: &Amounts,
    out: &mut Vec<String>,
) {
    match req.get(name) {
        None => out.push(format!(
            "minimum {name} usage per {kind} is {}.  No request is specified",
            min.0
        )),
        Some(r) if r.1 < min.1 => out.push(format!(
            "minimum {name} usage per {kind} is {}, but request is {}",
            min.0, r.0
        )),
        Some(_) => match lim.get(name) {
            Some(l) if l.1 < min.1 => out.push(format!(
                "minimum {name} usage per {kind} is {}, but limit is {}",
                min.0, l.0
            )),
            _ => {}
        },
    }
}

fn max_check(
    kind: &str,
    name: &str,
    max: &(String, i128),
    req: &Amounts,
    lim: &Amounts,
    out: &mut Vec<String>,
) {
    match lim.get(name) {
        None => out.push(format!(
            "maximum {name} usage per {kind} is {}.  No limit is specified",
            max.0
        )),
        Some(l) if l.1 > max.1 => out.push(format!(
            "maximum {name} usage per {kind} is {}, but limit is {}",
            max.0, l.0
        )),
        Some(_) => match req.get(name) {
            Some(r) if r.1 > max.1 => out.push(format!(
                "maximum {name} usage per {kind} is {}, but request is {}",
                max.0, r.0
            )),
            _ => {}
        },
    }
}

fn ratio_check(
    kind: &str,
    name: &str,
    ratio: &(String, i128),
    req: &Amounts,
    lim: &Amounts,
    out: &mut Vec<String>,
) {
    let prefix = format!(
        "{name} max limit to request ratio per {kind} is {}",
        ratio.0
    );
    match (req.get(name).filter(|r| r.1 > 0), lim.get(name)) {
        (None, _) => out.push(format!(
            "{prefix}, but no request is specified or request is 0"
        )),
        (_, None) => out.push(format!("{prefix}, but no limit is specified")),
        (Some(r), Some(l)) => {
            let observed = l.1 as f64 / r.1 as f64;
            if observed * 1000.0 > ratio.1 as f64 {
                out.push(format!("{prefix}, but provided ratio is {observed:.6}"));
            }
        }
    }
}

fn check_item(kind: &str, item: &Value, req: &Amounts, lim: &Amounts, out: &mut Vec<String>) {
    for (name, min) in amounts(item.get("min")) {
        min_check(kind, &name, &min, req, lim, out);
    }
    for (name, max) in amounts(item.get("max")) {
        max_check(kind, &name, &max, req, lim, out);
    }
    for (name, ratio) in amounts(item.get("maxLimitRequestRatio")) {
        ratio_check(kind, &name, &ratio, req, lim, out);
    }
}

/// Every Container item against each container, every Pod item against the pod's sums.
fn pod_violations(ranges: &[Value], pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_array))
        .flatten()
        .collect();
    for item in items(ranges, "Container") {
        for c in &containers {
            let req = amounts(c.pointer("/resources/requests"));
            let lim = amounts(c.pointer("/resources/limits"));
            check_item("Container", item, &req, &lim, &mut out);
        }
    }
    let mut pod_items = items(ranges, "Pod").peekable();
    if pod_items.peek().is_some() {
        let sum = |field: &str| {
            let mut total: Amounts = BTreeMap::new();
            for c in containers
                .iter()
                .filter(|c| c.get("restartPolicy").is_none())
            {
                for (k, (_, q)) in amounts(c.pointer(&format!("/resources/{field}"))) {
                    total.entry(k).or_insert((String::new(), 0)).1 += q;
                }
            }
            for (k, v) in total.iter_mut() {
                v.0 = keelson_apimachinery::quota::format(k, v.1);
            }
            total
        };
        let (req, lim) = (sum("requests"), sum("limits"));
        for item in pod_items {
            check_item("Pod", item, &req, &lim, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(items: Value) -> Vec<Value> {
        vec![json!({"spec": {"limits": items}})]
    }

    #[test]
    fn defaults_fill_only_what_the_container_leaves_out() {
        let ranges = range(json!([{"type": "Container",
            "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]));
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "app"},
            {"name": "side", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}},
        ]}});
        assert!(set_defaults(&ranges, &mut pod));
        let app = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(app["requests"], json!({"cpu": "100m", "memory": "128Mi"}));
        assert_eq!(app["limits"], json!({"cpu": "500m", "memory": "256Mi"}));
        let side = &pod["spec"]["containers"][1]["resources"];
        assert_eq!(side["limits"], json!({"cpu": "1", "memory": "256Mi"}));
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app; memory request for container side; memory limit for container side"
        );
    }

    #[test]
    fn min_max_and_ratio_speak_as_upstream() {
        let ranges = range(json!([
            {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"cpu": "2"}},
            {"type": "Pod", "max": {"cpu": "1500m"}},
        ]));
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "500m", "memory": "32Mi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "500m", "memory": "64Mi"}}},
        ]}});
        assert_eq!(
            pod_violations(&ranges, &pod),
            vec![
                "minimum memory usage per Container is 64Mi, but request is 32Mi",
                "maximum cpu usage per Container is 1, but limit is 2",
                "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",
                "maximum cpu usage per Pod is 1500m, but limit is 2500m",
            ]
        );
    }
}
