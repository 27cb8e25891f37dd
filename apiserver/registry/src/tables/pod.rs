//! Pod rows: upstream's printPod, which folds phase, init and container states into STATUS.

use super::age::human_duration;
use super::{age, age_col, col, name, name_col, Column};
use crate::json::{at, bool_at, int_at, items, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
        col("Status", "string", 0, "The aggregate status of the containers in this pod."),
        col("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        age_col(),
        col("IP", "string", 1, "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
        col("Node", "string", 1, "NodeName is a request to schedule this pod onto a specific node."),
        col("Nominated Node", "string", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods."),
        col("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness."),
    ]
}

/// Restart counts and the latest time any of the counted containers last terminated.
#[derive(Default)]
struct Restarts {
    count: i64,
    last: Option<DateTime<Utc>>,
}

impl Restarts {
    fn add(&mut self, status: &Value) {
        // Saturating: restart counts come from whoever wrote the Pod's status.
        let restarts = int_at(status, "restartCount").unwrap_or(0);
        self.count = self.count.saturating_add(restarts);
        let finished = at(status, &["lastState", "terminated", "finishedAt"])
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        if finished > self.last {
            self.last = finished;
        }
    }

    fn text(&self, now: DateTime<Utc>) -> String {
        match self.last {
            Some(last) if self.count != 0 => {
                let ago = human_duration((now - last).num_seconds());
                format!("{} ({ago} ago)", self.count)
            }
            _ => self.count.to_string(),
        }
    }
}

fn condition_true(status: &Value, kind: &str) -> bool {
    items(status, "conditions")
        .iter()
        .any(|c| str_at(c, "type") == kind && str_at(c, "status") == "True")
}

/// "Signal:9" / "ExitCode:1" for a terminated state without a reason.
fn exit_text(terminated: &Value) -> String {
    match int_at(terminated, "signal").unwrap_or(0) {
        0 => format!("ExitCode:{}", int_at(terminated, "exitCode").unwrap_or(0)),
        s => format!("Signal:{s}"),
    }
}

/// What printPod folds the container statuses into: READY, RESTARTS and STATUS.
struct Row {
    ready: usize,
    restarts: Restarts,
    reason: String,
}

/// An init container that keeps running beside the others (restartPolicy Always).
fn is_sidecar(init_specs: &[Value], name: &str) -> bool {
    init_specs
        .iter()
        .any(|c| str_at(c, "name") == name && str_at(c, "restartPolicy") == "Always")
}

pub(super) fn cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let spec = pod.get("spec").unwrap_or(&empty);
    let status = pod.get("status").unwrap_or(&empty);
    let init_specs = items(spec, "initContainers");
    let sidecars = init_specs
        .iter()
        .filter(|c| is_sidecar(init_specs, str_at(c, "name")))
        .count();
    let total = items(spec, "containers").len() + sidecars;
    let mut row = Row {
        ready: 0,
        restarts: Restarts::default(),
        reason: pod_reason(status),
    };
    let (sidecar_restarts, initializing) = init_containers(status, init_specs, &mut row);
    if !initializing || condition_true(status, "Initialized") {
        row.restarts = sidecar_restarts;
        containers(status, &mut row);
    }
    deletion(pod, status, &mut row.reason);
    vec![
        name(pod),
        json!(format!("{}/{total}", row.ready)),
        json!(row.reason),
        json!(row.restarts.text(now)),
        age(pod, now),
        json!(or_none(pod_ip(status))),
        json!(or_none(str_at(spec, "nodeName"))),
        json!(or_none(str_at(status, "nominatedNodeName"))),
        json!(readiness_gates(spec, status)),
    ]
}

/// The Pod's own reason, else its phase; SchedulingGated while a gate holds it.
fn pod_reason(status: &Value) -> String {
    let gated = items(status, "conditions")
        .iter()
        .any(|c| str_at(c, "type") == "PodScheduled" && str_at(c, "reason") == "SchedulingGated");
    match str_at(status, "reason") {
        _ if gated => "SchedulingGated".to_string(),
        "" => str_at(status, "phase").to_string(),
        r => r.to_string(),
    }
}

/// Counts init containers' restarts and started sidecars; the first init container that has
/// not finished gives the reason (`Init:...`). Returns the sidecars' restarts and whether the
/// Pod is still initializing.
fn init_containers(status: &Value, init_specs: &[Value], row: &mut Row) -> (Restarts, bool) {
    let mut sidecar_restarts = Restarts::default();
    for (i, cs) in items(status, "initContainerStatuses").iter().enumerate() {
        row.restarts.add(cs);
        let sidecar = is_sidecar(init_specs, str_at(cs, "name"));
        if sidecar {
            sidecar_restarts.add(cs);
        }
        let terminated = at(cs, &["state", "terminated"]).filter(|t| t.is_object());
        if terminated.is_some_and(|t| int_at(t, "exitCode") == Some(0)) {
            continue;
        }
        if sidecar && bool_at(cs, "started") {
            row.ready += usize::from(bool_at(cs, "ready"));
            continue;
        }
        let waiting = at(cs, &["state", "waiting", "reason"])
            .and_then(Value::as_str)
            .unwrap_or("");
        row.reason = if let Some(t) = terminated {
            match str_at(t, "reason") {
                "" => format!("Init:{}", exit_text(t)),
                r => format!("Init:{r}"),
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        return (sidecar_restarts, true);
    }
    (sidecar_restarts, false)
}

/// The app containers, last first as upstream walks them: a waiting or terminated one gives
/// the reason; ready running ones count as ready.
fn containers(status: &Value, row: &mut Row) {
    let empty = json!({});
    let mut has_running = false;
    for cs in items(status, "containerStatuses").iter().rev() {
        row.restarts.add(cs);
        let state = cs.get("state").unwrap_or(&empty);
        let waiting = at(state, &["waiting", "reason"])
            .and_then(Value::as_str)
            .unwrap_or("");
        let terminated = state.get("terminated").filter(|t| t.is_object());
        if !waiting.is_empty() {
            row.reason = waiting.to_string();
        } else if let Some(t) = terminated {
            row.reason = match str_at(t, "reason") {
                "" => exit_text(t),
                r => r.to_string(),
            };
        } else if bool_at(cs, "ready") && state.get("running").is_some_and(Value::is_object) {
            has_running = true;
            row.ready += 1;
        }
    }
    if row.reason == "Completed" && has_running {
        let ready = condition_true(status, "Ready");
        row.reason = if ready { "Running" } else { "NotReady" }.to_string();
    }
}

/// A Pod being deleted shows Terminating (Unknown when its node is lost) until it has finished.
fn deletion(pod: &Value, status: &Value, reason: &mut String) {
    let deleting = at(pod, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null());
    let phase = str_at(status, "phase");
    if deleting && str_at(status, "reason") == "NodeLost" {
        *reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        *reason = "Terminating".to_string();
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

fn pod_ip(status: &Value) -> &str {
    items(status, "podIPs")
        .first()
        .map(|ip| str_at(ip, "ip"))
        .unwrap_or_else(|| str_at(status, "podIP"))
}

fn readiness_gates(spec: &Value, status: &Value) -> String {
    let gates = items(spec, "readinessGates");
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let conditions = items(status, "conditions");
    let passed = gates
        .iter()
        .filter(|g| {
            let kind = str_at(g, "conditionType");
            conditions
                .iter()
                .find(|c| str_at(c, "type") == kind)
                .is_some_and(|c| str_at(c, "status") == "True")
        })
        .count();
    format!("{passed}/{}", gates.len())
}
