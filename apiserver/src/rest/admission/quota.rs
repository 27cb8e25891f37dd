//! Upstream's ResourceQuota admission: a new object is charged to every quota of its namespace
//! that limits something it uses. Past a quota's hard limit the create is refused with
//! upstream's "exceeded quota" message; otherwise the charge is recorded in status.used by
//! compare-and-swap before the object is stored, so two creates racing for the last place
//! cannot both get it (a lost race retries). The resource quota controller recounts later,
//! which gives back a charge whose create then failed, as upstream.

use super::super::read::list_entries;
use super::super::{Api, Target};
use crate::object;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{Precondition, StoreError, Write};
use keelson_apimachinery::quota::{self, Usage};
use serde_json::{json, Value};

/// How often a lost race on a quota's status is retried.
const RETRIES: usize = 8;

fn forbidden(res: &Resource, obj: &Value, why: String) -> ApiError {
    let name = object::name(obj);
    let plural = if res.group.is_empty() {
        res.plural.to_string()
    } else {
        format!("{}.{}", res.plural, res.group)
    };
    ApiError::forbidden(
        format!("{plural} \"{name}\" is forbidden: {why}"),
        Some((res.group, res.plural, name)),
    )
}

/// "a=1,b=2" over `names`, as upstream's prettyPrint.
fn pretty(names: &[&String], amounts: &Usage) -> String {
    names
        .iter()
        .map(|n| {
            format!(
                "{n}={}",
                quota::format(n, amounts.get(*n).copied().unwrap_or(0))
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn amount(u: &Usage, name: &str) -> i128 {
    u.get(name).copied().unwrap_or(0)
}

/// What one quota says about the object: its new status.used, or why the create is refused.
/// None when the quota limits nothing the object uses.
fn check(
    quota_obj: &Value,
    res: &Resource,
    obj: &Value,
    usage: &Usage,
) -> Option<Result<Usage, String>> {
    let name = object::name(quota_obj);
    let hard = quota::parse_list(quota_obj.pointer("/spec/hard"));
    let spec_hard = quota_obj.pointer("/spec/hard").and_then(Value::as_object)?;
    if !quota::applies(quota_obj, res.group, res.plural, obj) {
        return None;
    }
    if res.group.is_empty() && res.plural == "pods" {
        let missing = quota::unspecified(spec_hard, obj);
        if !missing.is_empty() {
            let parts: Vec<String> = missing
                .iter()
                .map(|(r, cs)| format!("{r} for: {}", cs.join(",")))
                .collect();
            return Some(Err(format!(
                "failed quota: {name}: must specify {}",
                parts.join("; ")
            )));
        }
    }
    let mut limited: Vec<&String> = hard.keys().filter(|k| usage.contains_key(*k)).collect();
    if limited.is_empty() {
        return None;
    }
    limited.sort();
    let status_hard = quota_obj.pointer("/status/hard").and_then(Value::as_object);
    let unknown: Vec<&str> = limited
        .iter()
        .filter(|k| !status_hard.is_some_and(|h| h.contains_key(k.as_str())))
        .map(|k| k.as_str())
        .collect();
    if !unknown.is_empty() {
        return Some(Err(format!(
            "status unknown for quota: {name}, resources: {}",
            unknown.join(",")
        )));
    }
    let mut used = quota::parse_list(quota_obj.pointer("/status/used"));
    let over: Vec<&String> = limited
        .iter()
        .copied()
        .filter(|k| amount(&used, k) + amount(usage, k) > amount(&hard, k))
        .collect();
    if !over.is_empty() {
        return Some(Err(format!(
            "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
            pretty(&over, usage),
            pretty(&over, &used),
            pretty(&over, &hard)
        )));
    }
    for k in limited {
        *used.entry(k.clone()).or_insert(0) += amount(usage, k);
    }
    Some(Ok(used))
}

/// Charges a new object to its namespace's quotas, or refuses it. A dry run only checks.
pub async fn charge(
    api: &Api,
    res: &'static Resource,
    ns: &str,
    obj: &Value,
    dry_run: bool,
) -> ApiResult<()> {
    let Some(quota_res) = crate::resources::lookup("", "v1", "resourcequotas") else {
        return Ok(());
    };
    if !res.namespaced {
        return Ok(());
    }
    let usage = quota::usage(res.group, res.plural, obj);
    let all = Target {
        res: quota_res,
        namespace: ns.to_string(),
        name: String::new(),
    };
    'attempt: for _ in 0..RETRIES {
        let (entries, _) = list_entries(api, &all, &Default::default())?;
        let mut charges = Vec::new();
        for e in &entries {
            match check(&e.obj, res, obj, &usage) {
                None => {}
                Some(Err(why)) => return Err(forbidden(res, obj, why)),
                Some(Ok(used)) => charges.push((e.clone(), used)),
            }
        }
        if dry_run {
            return Ok(());
        }
        for (q, used) in charges {
            let mut next = (*q.obj).clone();
            object::set_path(&mut next, &["status", "used"], json!(quota::to_list(&used)));
            let t = Target {
                res: quota_res,
                namespace: ns.to_string(),
                name: object::name(&q.obj).to_string(),
            };
            // Only status.used changes (what the quota's status update would write), and only
            // over the version read: a concurrent charge makes this conflict, and all is re-read.
            let w = Write {
                key: t.key(),
                value: Some(next),
                precondition: Precondition::Rev(q.rev),
            };
            match api.store.write(w).await {
                Ok(_) => {}
                Err(StoreError::Conflict { .. }) => continue 'attempt,
                Err(e) => return Err(super::super::store_error(&t, e)),
            }
        }
        return Ok(());
    }
    Err(ApiError::conflict("", "resourcequotas", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods_res() -> &'static Resource {
        crate::resources::lookup("", "v1", "pods").unwrap()
    }

    fn pod(name: &str, cpu: Option<&str>) -> Value {
        let resources = cpu.map_or(json!({}), |c| json!({"requests": {"cpu": c}}));
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "resources": resources}]}})
    }

    #[test]
    fn the_third_pod_of_two_exceeds_the_quota() {
        let q = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2"}},
            "status": {"hard": {"pods": "2"}, "used": {"pods": "2"}}});
        let p = pod("c", None);
        let usage = quota::usage("", "pods", &p);
        assert_eq!(
            check(&q, pods_res(), &p, &usage),
            Some(Err(
                "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2".into()
            ))
        );
    }

    #[test]
    fn a_fitting_pod_is_charged_and_unsynced_quotas_refuse() {
        let q = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2", "requests.cpu": "1"}},
            "status": {"hard": {"pods": "2", "requests.cpu": "1"}, "used": {"pods": "1", "requests.cpu": "250m"}}});
        let p = pod("b", Some("500m"));
        let used = check(&q, pods_res(), &p, &quota::usage("", "pods", &p))
            .unwrap()
            .unwrap();
        assert_eq!(
            quota::to_list(&used),
            *json!({"pods": "2", "requests.cpu": "750m"})
                .as_object()
                .unwrap()
        );
        let fresh = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2"}}});
        assert_eq!(
            check(&fresh, pods_res(), &p, &quota::usage("", "pods", &p)),
            Some(Err("status unknown for quota: q, resources: pods".into()))
        );
        let no_request = pod("n", None);
        assert_eq!(
            check(
                &q,
                pods_res(),
                &no_request,
                &quota::usage("", "pods", &no_request)
            ),
            Some(Err(
                "failed quota: q: must specify requests.cpu for: app".into()
            ))
        );
    }
}
