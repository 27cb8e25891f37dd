//! Role, ClusterRole, RoleBinding and ClusterRoleBinding rules (rbac/validation): each policy
//! rule has verbs and either resources with API groups or, for cluster roles only, non-resource
//! URLs; a binding names a role of an allowed kind and known subject kinds; roleRef is fixed.

use super::field_checks::name_check;
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Role (namespaced) or ClusterRole rules.
pub(crate) fn role(obj: &Value, namespaced: bool, out: &mut Vec<Cause>) {
    let path = Path::root().child("rules");
    for (i, rule) in items(obj, "rules").iter().enumerate() {
        policy_rule(rule, namespaced, &path.index(i), out);
    }
}

fn policy_rule(rule: &Value, namespaced: bool, path: &Path, out: &mut Vec<Cause>) {
    if items(rule, "verbs").is_empty() {
        out.push(Cause::required(
            path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = items(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let value = json!(urls);
        if namespaced {
            let msg = "namespaced rules cannot apply to non-resource URLs";
            out.push(Cause::invalid(path.child("nonResourceURLs"), &value, msg));
        }
        if ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|k| !items(rule, k).is_empty())
        {
            let msg = "rules cannot apply to both regular resources and non-resource URLs";
            out.push(Cause::invalid(path.child("nonResourceURLs"), &value, msg));
        }
        return;
    }
    if items(rule, "apiGroups").is_empty() {
        out.push(Cause::required(
            path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if items(rule, "resources").is_empty() {
        out.push(Cause::required(
            path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

/// RoleBinding (namespaced: roleRef Role or ClusterRole) or ClusterRoleBinding (ClusterRole;
/// service account subjects need a namespace). `old` is the stored binding on update.
pub(crate) fn binding(obj: &Value, old: Option<&Value>, namespaced: bool, out: &mut Vec<Cause>) {
    let empty = json!({});
    let role_ref = obj.get("roleRef").unwrap_or(&empty);
    let rp = Path::root().child("roleRef");
    let group = str_at(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        out.push(Cause::not_supported(
            rp.child("apiGroup"),
            &json!(group),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = str_at(role_ref, "kind");
    if !kinds.contains(&kind) {
        out.push(Cause::not_supported(rp.child("kind"), &json!(kind), kinds));
    }
    let name = str_at(role_ref, "name");
    if name.is_empty() {
        out.push(Cause::required(rp.child("name"), ""));
    } else {
        name_check(path_segment_name(name), &rp.child("name"), name, out);
    }
    let sp = Path::root().child("subjects");
    for (i, s) in items(obj, "subjects").iter().enumerate() {
        subject(s, namespaced, &sp.index(i), out);
    }
    if let Some(old) = old {
        let before = old.get("roleRef").unwrap_or(&empty);
        if before != role_ref {
            out.push(Cause::invalid(rp, role_ref, "cannot change roleRef"));
        }
    }
}

fn subject(s: &Value, namespaced: bool, path: &Path, out: &mut Vec<Cause>) {
    let name = str_at(s, "name");
    if name.is_empty() {
        out.push(Cause::required(path.child("name"), ""));
    }
    let group = str_at(s, "apiGroup");
    match str_at(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                name_check(
                    names::dns1123_subdomain(name),
                    &path.child("name"),
                    name,
                    out,
                );
            }
            if !group.is_empty() {
                out.push(Cause::not_supported(
                    path.child("apiGroup"),
                    &json!(group),
                    &[""],
                ));
            }
            if !namespaced && str_at(s, "namespace").is_empty() {
                out.push(Cause::required(path.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                out.push(Cause::not_supported(
                    path.child("apiGroup"),
                    &json!(group),
                    &[RBAC_GROUP],
                ));
            }
        }
        other => out.push(Cause::not_supported(
            path.child("kind"),
            &json!(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

/// Upstream's ValidateRBACName (path.IsValidPathSegmentName): role names such as
/// "system:node" hold colons, so the DNS rules do not apply.
pub(crate) fn path_segment_name(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name == "." || name == ".." {
        errs.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}
