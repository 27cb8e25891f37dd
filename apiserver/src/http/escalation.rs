//! Where RBAC escalation prevention (`auth::rbac::escalation`) meets a request: the role or
//! binding as it would be stored (the body, or for a patch the stored object patched), the
//! writer's own rules, and the `escalate` and `bind` verbs that waive the check.

use super::{App, Call};
use crate::auth::authorize::{Attributes, Decision, ResourceAttributes};
use crate::auth::rbac::escalation::{compact, uncovered};
use crate::auth::rbac::{Rule, RBAC_GROUP};
use crate::negotiate::{self, PatchType};
use crate::resources;
use http::header;
use keelson_apimachinery::patch;
use keelson_apimachinery::well_known::MASTERS_GROUP;
use serde_json::Value;
use std::borrow::Cow;

/// Ok, or upstream's message for a write of a role or binding granting more than its writer
/// holds. Bodies that cannot be read are left to the handler to refuse.
pub fn check(app: &App, call: &Call, a: &Attributes) -> Result<(), String> {
    let Some(r) = &a.resource else { return Ok(()) };
    let writes = matches!(a.verb, "create" | "update" | "patch");
    if r.group != RBAC_GROUP || !writes || !r.subresource.is_empty() {
        return Ok(());
    }
    if call.user.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Ok(());
    }
    let Some(obj) = resulting(app, call, a) else {
        return Ok(());
    };
    let user = &call.user;
    let waived = |verb: &str, resource: &str, name: &str| {
        let ask = Attributes {
            verb,
            resource: Some(ResourceAttributes {
                group: RBAC_GROUP,
                resource,
                subresource: "",
                namespace: r.namespace,
                name: Cow::Borrowed(name),
                field_selector: std::borrow::Cow::Borrowed(""),
            }),
            path: "",
        };
        matches!(app.authz.decide(user, &ask), Decision::Allow(_))
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&r.name);
    let granted = match r.resource {
        "roles" | "clusterroles" if waived("escalate", r.resource, name) => return Ok(()),
        "roles" | "clusterroles" => rules_of(&obj),
        _ => {
            let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
            let (kind, role) = (text("/roleRef/kind"), text("/roleRef/name"));
            let (plural, ns) = match kind {
                "Role" => ("roles", r.namespace),
                _ => ("clusterroles", ""),
            };
            if waived("bind", plural, role) {
                return Ok(());
            }
            let stored = resources::lookup(RBAC_GROUP, "v1", plural)
                .and_then(|res| app.api.store.get(&res.key(ns, role)));
            match stored {
                Some(e) => rules_of(&e.obj),
                None => return Err(format!("{plural}.{RBAC_GROUP} {role:?} not found")),
            }
        }
    };
    let (held, _) = app.authz.rules(user, r.namespace);
    let missing = uncovered(&held, &granted);
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing.iter().map(compact).collect();
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    Err(format!(
        "{}.{RBAC_GROUP} {name:?} is forbidden: user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        r.resource,
        user.name,
        groups.join(" "),
        lines.join("\n")
    ))
}

fn rules_of(obj: &Value) -> Vec<Rule> {
    obj.get("rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().map(Rule::from_value).collect())
        .unwrap_or_default()
}

/// The object a create or update sends, or a patch would leave.
fn resulting(app: &App, call: &Call, a: &Attributes) -> Option<Value> {
    let body = call.object().ok()?;
    if a.verb != "patch" {
        return Some(body);
    }
    let r = a.resource.as_ref()?;
    let res = resources::lookup(r.group, "v1", r.resource)?;
    let stored = app.api.store.get(&res.key(r.namespace, &r.name))?;
    let old = stored.value();
    match negotiate::patch_type(call.header(header::CONTENT_TYPE)).ok()? {
        PatchType::Json => patch::json_patch(&old, &body).ok(),
        PatchType::Merge => Some(patch::merge_patch(&old, &body)),
        PatchType::Strategic => patch::strategic_merge_patch(&old, &body, res.kind).ok(),
        PatchType::Apply => patch::apply_patch(Some(&old), &body, res.kind).ok(),
    }
}
