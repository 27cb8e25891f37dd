//! The eviction subresource's side of PodDisruptionBudgets, as upstream's eviction REST: a pod
//! selected by a budget is evicted only while the budget allows a disruption, and the grant is
//! recorded in the budget's status (disruptionsAllowed less one, the pod in disruptedPods) in the
//! same compare-and-swap loop, so two evictions cannot both take the last allowed disruption.
//! The disruption controller recomputes the status from the pods afterwards.

use super::read::list_entries;
use super::update::update;
use super::Sub;
use super::{Api, Target};
use crate::status::{ApiError, ApiResult};
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

/// How often a lost race on the budget's status is retried before giving up with a conflict.
const RETRIES: usize = 5;

/// Pods a budget does not protect: finished, not yet running, or already being deleted.
pub fn can_ignore(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    matches!(phase, Some("Succeeded" | "Failed" | "Pending"))
        || pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Does budget `pdb` select `pod`? policy/v1: no selector selects nothing, `{}` everything.
fn selects(pdb: &Value, pod: &Value) -> bool {
    let Some(sel) = pdb.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return false;
    };
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    LabelSelector::from_json(sel).is_ok_and(|s| s.matches(labels))
}

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn too_many(cause: String) -> ApiError {
    ApiError {
        details: Some(json!({ "causes": [{ "reason": "DisruptionBudget", "message": cause }] })),
        ..ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
    }
}

/// Checks the pod's budget and records the eviction in it; Ok when the pod may go.
pub async fn check_and_record(api: &Api, ns: &str, pod: &Value, dry_run: bool) -> ApiResult<()> {
    let Some(res) = crate::resources::lookup("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let pod_name = crate::object::name(pod).to_string();
    let all = Target {
        res,
        namespace: ns.to_string(),
        name: String::new(),
    };
    for _ in 0..RETRIES {
        let (entries, _) = list_entries(api, &all, &Default::default())?;
        let budgets: Vec<&Value> = entries
            .iter()
            .map(|e| &*e.obj)
            .filter(|b| selects(b, pod))
            .collect();
        let pdb = match budgets.as_slice() {
            [] => return Ok(()),
            [one] => *one,
            _ => {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ))
            }
        };
        let name = crate::object::name(pdb).to_string();
        let (healthy, desired) = (
            int(pdb, "/status/currentHealthy"),
            int(pdb, "/status/desiredHealthy"),
        );
        // An unready pod does not count as healthy: with the budget met it may go at once
        // (unhealthyPodEvictionPolicy IfHealthyBudget, the default; AlwaysAllow always).
        if !is_ready(pod) {
            let policy = pdb
                .pointer("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str);
            if policy == Some("AlwaysAllow") || (healthy >= desired && desired > 0) {
                return Ok(());
            }
        }
        if int(pdb, "/status/observedGeneration") < int(pdb, "/metadata/generation") {
            return Err(too_many(format!(
                "The disruption budget {name} is still being processed by the server."
            )));
        }
        let allowed = int(pdb, "/status/disruptionsAllowed");
        if allowed < 0 {
            return Err(ApiError::forbidden(
                "pdb disruptions allowed is negative".into(),
                None,
            ));
        }
        if allowed == 0 {
            return Err(too_many(format!(
                "The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
            )));
        }
        if dry_run {
            return Ok(());
        }
        let mut next = pdb.clone();
        crate::object::set_path(
            &mut next,
            &["status", "disruptionsAllowed"],
            json!(allowed - 1),
        );
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        crate::object::set_path(
            &mut next,
            &["status", "disruptedPods", pod_name.as_str()],
            json!(now),
        );
        if allowed == 1 {
            let cond = json!([{ "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                "message": "", "lastTransitionTime": now, "observedGeneration": int(pdb, "/metadata/generation") }]);
            crate::object::set_path(&mut next, &["status", "conditions"], cond);
        }
        let t = Target {
            res,
            namespace: ns.to_string(),
            name,
        };
        // The stored resourceVersion rides along: a concurrent change makes this a conflict.
        match update(api, &t, next, Sub::Status, false).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict("policy", "poddisruptionbudgets", ""))
}
