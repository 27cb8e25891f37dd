//! ObjectMeta rules common to all kinds (ValidateObjectMeta).

use super::field_checks::{labels, name_check};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use crate::resources::is_namespaced;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The name rule of each kind (upstream's ValidateXName functions).
fn name_rule(kind: &str) -> fn(&str) -> Vec<String> {
    match kind {
        "Namespace" => names::dns1123_label,
        "Service" => names::dns1035_label,
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
            super::rbac::path_segment_name
        }
        _ => names::dns1123_subdomain,
    }
}

pub(crate) fn object_meta(kind: &str, obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("metadata");
    let empty = json!({});
    let meta = obj.get("metadata").unwrap_or(&empty);
    let name = str_at(meta, "name");
    if name.is_empty() {
        if str_at(meta, "generateName").is_empty() {
            out.push(Cause::required(
                path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        name_check(name_rule(kind)(name), &path.child("name"), name, out);
    }
    let namespace = str_at(meta, "namespace");
    if is_namespaced(kind) && !namespace.is_empty() {
        let errs = names::dns1123_label(namespace);
        name_check(errs, &path.child("namespace"), namespace, out);
    }
    labels(meta.get("labels"), &path.child("labels"), out);
    annotations(meta.get("annotations"), &path.child("annotations"), out);
    for (i, f) in items(meta, "finalizers").iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        let p = path.child("finalizers").index(i);
        name_check(names::qualified_name(f), &p, f, out);
    }
    owner_references(meta, &path.child("ownerReferences"), out);
}

fn annotations(map: Option<&Value>, path: &Path, out: &mut Vec<Cause>) {
    let Some(map) = map.and_then(Value::as_object) else {
        return;
    };
    let mut total = 0;
    for (k, v) in map {
        // Upstream checks annotation keys in lower case.
        name_check(names::qualified_name(&k.to_lowercase()), path, k, out);
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        out.push(Cause::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

fn owner_references(meta: &Value, path: &Path, out: &mut Vec<Cause>) {
    let refs = items(meta, "ownerReferences");
    for r in refs {
        for (key, what) in [
            ("apiVersion", "version"),
            ("kind", "kind"),
            ("name", "name"),
            ("uid", "uid"),
        ] {
            if str_at(r, key).is_empty() {
                let msg = format!("{what} must not be empty");
                out.push(Cause::invalid(path.child(key), &json!(""), &msg));
            }
        }
    }
    let controllers = refs
        .iter()
        .filter(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .count();
    if controllers > 1 {
        out.push(Cause::invalid(
            path,
            &json!(controllers),
            "Only one reference can have Controller set to true",
        ));
    }
}
