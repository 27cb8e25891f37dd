//! Defaults of the smaller core and discovery kinds.

use crate::json::{default, each_object_mut, is_unset, object_mut};
use keelson_apimachinery::base64;
use serde_json::{json, Map, Value};

pub(crate) fn namespace(obj: &mut Map<String, Value>) {
    // The label every namespace carries since v1.21, so selectors can pick namespaces by name.
    if let Some(name) = obj.get("metadata").and_then(|m| m.get("name")).cloned() {
        if let Some(labels) = object_mut(obj, "metadata").and_then(|m| object_mut(m, "labels")) {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
    }
    if let Some(spec) = object_mut(obj, "spec") {
        default(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(status) = object_mut(obj, "status") {
        default(status, "phase", json!("Active"));
    }
}

pub(crate) fn secret(obj: &mut Map<String, Value>) {
    if is_unset(obj, "type") {
        obj.insert("type".into(), json!("Opaque"));
    }
    // stringData is write-only: merged into data (winning over it) and never stored.
    if let Some(Value::Object(strings)) = obj.remove("stringData") {
        if let Some(data) = object_mut(obj, "data") {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                data.insert(k, json!(base64::encode(text.as_bytes())));
            }
        }
    }
}

pub(crate) fn node(obj: &mut Map<String, Value>) {
    // SetDefaults_NodeStatus: allocatable defaults to capacity.
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        if let Some(capacity) = status.get("capacity").cloned() {
            default(status, "allocatable", capacity);
        }
    }
}

fn port_protocol(p: &mut Map<String, Value>) {
    if is_unset(p, "protocol") {
        p.insert("protocol".into(), json!("TCP"));
    }
}

pub(crate) fn endpoints(obj: &mut Map<String, Value>) {
    each_object_mut(obj, "subsets", |s| {
        each_object_mut(s, "ports", port_protocol)
    });
}

pub(crate) fn endpoint_slice(obj: &mut Map<String, Value>) {
    each_object_mut(obj, "ports", port_protocol);
}

/// certificates/v1 SetDefaults_CertificateSigningRequestCondition: a condition without a
/// status is True (kubectl certificate approve sends one).
pub(crate) fn csr(obj: &mut Map<String, Value>) {
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        each_object_mut(status, "conditions", |c| {
            default(c, "status", json!("True"))
        });
    }
}
