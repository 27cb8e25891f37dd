//! Ingress, IngressClass and NetworkPolicy rows.

use super::service::load_balancer_text;
use super::{age, age_col, col, name, name_col, Column};
use crate::json::{items, str_at};
use chrono::{DateTime, Utc};
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

pub(super) fn ingress_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Class",
            "string",
            0,
            "The name of the IngressClass resource that should be used",
        ),
        col(
            "Hosts",
            "string",
            0,
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            0,
            "Address is a list containing ingress points for the load-balancer",
        ),
        col(
            "Ports",
            "string",
            0,
            "Ports of TLS configurations that open",
        ),
        age_col(),
    ]
}

/// Upstream's formatHosts: up to three hosts, "*" when none.
fn hosts(spec: &Value) -> String {
    let rules = items(spec, "rules");
    let mut list = Vec::new();
    let mut more = false;
    for r in rules {
        if list.len() == 3 {
            more = true;
            break;
        }
        let host = str_at(r, "host");
        if !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_string();
    }
    let text = list.join(",");
    if more {
        format!("{text} + {} more...", rules.len() - 3)
    } else {
        text
    }
}

pub(super) fn ingress_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let class = match str_at(spec, "ingressClassName") {
        "" => "<none>",
        c => c,
    };
    let ports = if items(spec, "tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(obj),
        json!(class),
        json!(hosts(spec)),
        json!(load_balancer_text(obj.get("status").unwrap_or(&empty))),
        json!(ports),
        age(obj, now),
    ]
}

pub(super) fn ingress_class_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Controller",
            "string",
            0,
            "Controller that is responsible for handling this class",
        ),
        col(
            "Parameters",
            "string",
            0,
            "A reference to a resource with additional parameters",
        ),
        age_col(),
    ]
}

pub(super) fn ingress_class_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let parameters = match spec.get("parameters").filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(p) => {
            let group = match str_at(p, "apiGroup") {
                "" => String::new(),
                g => format!(".{g}"),
            };
            format!("{}{group}/{}", str_at(p, "kind"), str_at(p, "name"))
        }
    };
    vec![
        name(obj),
        json!(str_at(spec, "controller")),
        json!(parameters),
        age(obj, now),
    ]
}

pub(super) fn network_policy_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Pod-Selector",
            "string",
            0,
            "Selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policy can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.",
        ),
        age_col(),
    ]
}

/// Upstream's metav1.FormatLabelSelector: `<none>` when the selector selects everything (or is
/// absent), `<error>` when it cannot be converted.
fn format_label_selector(sel: Option<&Value>) -> String {
    match sel.map(LabelSelector::from_json) {
        Some(Err(_)) => "<error>".to_string(),
        Some(Ok(s)) if !s.requirements().is_empty() => s.to_string(),
        _ => "<none>".to_string(),
    }
}

pub(super) fn network_policy_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let selector = obj.get("spec").and_then(|s| s.get("podSelector"));
    vec![
        name(obj),
        json!(format_label_selector(selector)),
        age(obj, now),
    ]
}
