//! NodeRestriction admission, as upstream's plugin: a node (system:node:<name>) may write only
//! its own Node and Lease (and its LoadBalancer speaker's), create only mirror pods bound to itself that use no Secrets,
//! ConfigMaps, claims or service account, and delete, evict or write the status of only the
//! pods bound to it. Refusals are 403 in upstream's words.

use crate::auth::authorize::Attributes;
use crate::auth::node::{self, Kind};
use crate::auth::User;
use keelson_apimachinery::well_known::{
    MIRROR_POD_ANNOTATION, SPEAKER_LEASE_NAMESPACE, SPEAKER_LEASE_PREFIX,
};
use serde_json::Value;

/// What the check reads besides the request: its body (creates) and stored pods.
pub trait Lookup {
    fn body(&self) -> Option<Value>;
    fn pod(&self, namespace: &str, name: &str) -> Option<Value>;
}

/// Ok, or upstream's Forbidden message. Only nodes' writes are checked.
pub fn admit(user: &User, a: &Attributes, lookup: &dyn Lookup) -> Result<(), String> {
    let Some(node) = node::node_name(user) else {
        return Ok(());
    };
    let Some(r) = &a.resource else {
        return Ok(());
    };
    if !matches!(
        a.verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) {
        return Ok(());
    }
    let body_name = || {
        lookup
            .body()
            .and_then(|b| {
                b.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_default()
    };
    let name = match (a.verb, r.name.is_empty()) {
        ("create", true) => body_name(),
        _ => r.name.to_string(),
    };
    let refuse = |msg: String| {
        let qualified = match r.group {
            "" => r.resource.to_string(),
            g => format!("{}.{g}", r.resource),
        };
        Err(match name.as_str() {
            "" => format!("{qualified} is forbidden: {msg}"),
            n => format!("{qualified} {n:?} is forbidden: {msg}"),
        })
    };
    let result = match (r.group, r.resource) {
        ("", "nodes") if name != node => Err(format!(
            "node {node:?} is not allowed to modify node {name:?}"
        )),
        ("", "pods") => pod(node, a.verb, r.subresource, r.namespace, &name, lookup),
        ("coordination.k8s.io", "leases") => lease(node, r.namespace, &name),
        _ => Ok(()),
    };
    result.or_else(refuse)
}

/// A node writes its own Lease in kube-node-lease (upstream), and its LoadBalancer speaker's in
/// kube-system (Keelson's proxy on a joined node runs as the node); no other.
fn lease(node: &str, namespace: &str, name: &str) -> Result<(), String> {
    let speaker = format!("{SPEAKER_LEASE_PREFIX}{node}");
    if namespace == SPEAKER_LEASE_NAMESPACE && name == speaker {
        return Ok(());
    }
    if namespace != "kube-node-lease" {
        return Err("can only access leases in the \"kube-node-lease\" system namespace".into());
    }
    if name != node {
        return Err("can only access node lease with the same name as the requesting node".into());
    }
    Ok(())
}

fn pod(
    node: &str,
    verb: &str,
    sub: &str,
    ns: &str,
    name: &str,
    lookup: &dyn Lookup,
) -> Result<(), String> {
    match (verb, sub) {
        ("create", "") => mirror_pod(node, lookup.body().as_ref()),
        (_, "status") => own_pod(node, lookup.pod(ns, name), "update pod status for"),
        ("create", "eviction") => own_pod(node, lookup.pod(ns, name), "evict"),
        ("delete", "") => own_pod(node, lookup.pod(ns, name), "delete"),
        ("deletecollection", _) => Err(format!(
            "node {node:?} can only delete pods with spec.nodeName set to itself"
        )),
        _ => Ok(()),
    }
}

/// A stored pod bound to `node`; a pod that does not exist is for the handler to report.
fn own_pod(node: &str, pod: Option<Value>, what: &str) -> Result<(), String> {
    let Some(pod) = pod else { return Ok(()) };
    match pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        Some(n) if n == node => Ok(()),
        _ => Err(format!(
            "node {node:?} can only {what} pods with spec.nodeName set to itself"
        )),
    }
}

fn mirror_pod(node: &str, pod: Option<&Value>) -> Result<(), String> {
    let Some(pod) = pod else { return Ok(()) };
    let annotation = format!(
        "/metadata/annotations/{}",
        MIRROR_POD_ANNOTATION.replace('/', "~1")
    );
    if pod.pointer(&annotation).is_none() {
        return Err(format!(
            "pod does not have \"{MIRROR_POD_ANNOTATION}\" annotation, node {node:?} can only create mirror pods"
        ));
    }
    if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node) {
        return Err(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    if let Some((kind, _, _)) = node::references(pod).first() {
        let what = match kind {
            Kind::Secret => "reference secrets",
            Kind::ConfigMap => "reference configmaps",
            Kind::Claim => "reference persistentvolumeclaims",
            Kind::ServiceAccount => "use service accounts",
            Kind::Volume => "reference persistentvolumes",
        };
        return Err(format!("node {node:?} can not create pods that {what}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
