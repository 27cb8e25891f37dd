//! Upstream's Priority admission: a new Pod's spec.priority and spec.preemptionPolicy come from
//! its PriorityClass (or the global default class, else 0 and PreemptLowerPriority), and a
//! pod that states other values than its class gives is refused; at most one PriorityClass may
//! be the global default.

use super::super::read::list_entries;
use super::super::{Api, Target};
use crate::object;
use crate::status::{ApiError, ApiResult};
use serde_json::{json, Value};

fn classes(api: &Api) -> ApiResult<Vec<Value>> {
    let Some(res) = crate::resources::lookup("scheduling.k8s.io", "v1", "priorityclasses") else {
        return Ok(Vec::new());
    };
    let all = Target {
        res,
        namespace: String::new(),
        name: String::new(),
    };
    let (entries, _) = list_entries(api, &all, &Default::default())?;
    Ok(entries.iter().map(|e| (*e.obj).clone()).collect())
}

fn is_default(class: &Value) -> bool {
    class.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

fn forbidden(pod: &Value, why: String) -> ApiError {
    let name = object::name(pod);
    ApiError::forbidden(
        format!("pods \"{name}\" is forbidden: {why}"),
        Some(("", "pods", name)),
    )
}

pub fn admit_pod(api: &Api, pod: &mut Value) -> ApiResult<()> {
    if !pod.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    let all = classes(api)?;
    let named = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let class = match &named {
        Some(n) => match all.iter().find(|c| object::name(c) == n) {
            Some(c) => Some(c),
            None => {
                return Err(forbidden(
                    pod,
                    format!("no PriorityClass with name {n} was found"),
                ))
            }
        },
        // Several defaults (made before this check, or racing): the lowest value wins.
        None => all
            .iter()
            .filter(|c| is_default(c))
            .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0)),
    };
    let priority = class
        .and_then(|c| c.get("value"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let policy = class
        .and_then(|c| c.get("preemptionPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("PreemptLowerPriority")
        .to_string();
    if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64) {
        if given != priority {
            return Err(forbidden(pod, format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name")));
        }
    }
    if let Some(given) = pod
        .pointer("/spec/preemptionPolicy")
        .and_then(Value::as_str)
    {
        if given != policy {
            return Err(forbidden(pod, format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name")));
        }
    }
    if let (None, Some(c)) = (&named, class) {
        object::set_path(pod, &["spec", "priorityClassName"], json!(object::name(c)));
    }
    object::set_path(pod, &["spec", "priority"], json!(priority));
    object::set_path(pod, &["spec", "preemptionPolicy"], json!(policy));
    Ok(())
}

/// A PriorityClass made or changed to be the global default while another one is.
pub fn admit_class(api: &Api, class: &Value) -> ApiResult<()> {
    if !is_default(class) {
        return Ok(());
    }
    let name = object::name(class);
    if let Some(other) = classes(api)?
        .iter()
        .find(|c| is_default(c) && object::name(c) != name)
    {
        return Err(ApiError::forbidden(
            format!(
                "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: PriorityClass {} is already marked as default. Only one default can exist",
                object::name(other)
            ),
            Some(("scheduling.k8s.io", "priorityclasses", name)),
        ));
    }
    Ok(())
}
