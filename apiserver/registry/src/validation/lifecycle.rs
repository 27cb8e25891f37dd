//! Handlers of probes and lifecycle hooks (validateHandler, validateLifecycle, validateSleepAction).

use super::field_checks::{int_or_name_port, one_of};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use serde_json::{json, Value};

/// The handler kinds a probe may use, in upstream's order.
pub(crate) const PROBE_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc"];
/// The handler kinds a lifecycle hook may use, in upstream's order.
const HOOK_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "sleep"];

/// Exactly one of `kinds` set; checks exec, httpGet and tcpSocket. Returns the one found.
pub(crate) fn handler<'a>(
    h: &'a Value,
    kinds: &[&'a str],
    path: &Path,
    out: &mut Vec<Cause>,
) -> Option<&'a str> {
    let set: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| h.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let kind = match set.as_slice() {
        [] => {
            out.push(Cause::required(path, "must specify a handler type"));
            return None;
        }
        [first, rest @ ..] => {
            for extra in rest {
                let msg = "may not specify more than 1 handler type";
                out.push(Cause::forbidden(path.child(extra), msg));
            }
            *first
        }
    };
    let hp = path.child(kind);
    let Some(action) = h.get(kind).filter(|v| v.is_object()) else {
        return Some(kind);
    };
    match kind {
        "exec" if items(action, "command").is_empty() => {
            out.push(Cause::required(hp.child("command"), ""));
        }
        "httpGet" | "tcpSocket" => {
            match action.get("port") {
                None | Some(Value::Null) => out.push(Cause::required(hp.child("port"), "")),
                port => int_or_name_port(port, &hp.child("port"), out),
            }
            if kind == "httpGet" {
                http_get(action, &hp, out);
            }
        }
        _ => {}
    }
    Some(kind)
}

/// `postStart` and `preStop`: one handler each; a sleep within the pod's grace period.
pub(crate) fn lifecycle(l: &Value, grace_period: i64, path: &Path, out: &mut Vec<Cause>) {
    for key in ["postStart", "preStop"] {
        let Some(h) = l.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let hp = path.child(key);
        if handler(h, HOOK_HANDLERS, &hp, out) != Some("sleep") {
            continue;
        }
        // Kubernetes 1.32 without the PodLifecycleSleepActionAllowZero gate: 0 is refused.
        let seconds = h.pointer("/sleep/seconds").and_then(Value::as_i64);
        match seconds {
            None => out.push(Cause::required(hp.child("sleep").child("seconds"), "")),
            Some(s) if s <= 0 || s > grace_period => {
                let msg = format!(
                    "must be greater than 0 and less than terminationGracePeriodSeconds ({grace_period})"
                );
                out.push(Cause::invalid(hp.child("sleep"), &json!(s), &msg));
            }
            Some(_) => {}
        }
    }
}

/// The request an HTTP probe makes from the node: the path must be an absolute URL path and no
/// part may carry control characters (CR/LF would inject headers or whole requests).
fn http_get(h: &Value, hp: &Path, out: &mut Vec<Cause>) {
    one_of(h, "scheme", &["HTTP", "HTTPS"], false, hp, out);
    let path = str_at(h, "path");
    if !path.is_empty() && !path.starts_with('/') {
        out.push(Cause::invalid(
            hp.child("path"),
            &json!(path),
            "must be an absolute path",
        ));
    }
    for (key, value) in [("path", path), ("host", str_at(h, "host"))] {
        if value.chars().any(char::is_control) {
            let msg = "must not contain control characters";
            out.push(Cause::invalid(hp.child(key), &json!(value), msg));
        }
    }
    for (i, header) in items(h, "httpHeaders").iter().enumerate() {
        let p = hp.child("httpHeaders").index(i);
        let name = str_at(header, "name");
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            let msg = "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";
            out.push(Cause::invalid(p.child("name"), &json!(name), msg));
        }
        let value = str_at(header, "value");
        if value.chars().any(char::is_control) {
            let msg = "must not contain control characters";
            out.push(Cause::invalid(p.child("value"), &json!(value), msg));
        }
    }
}
