//! The Node authorizer: a node (user system:node:<name> in group system:nodes) reads only the
//! Secrets, ConfigMaps and PersistentVolumeClaims of pods bound to it (and the
//! PersistentVolumes those claims are bound to), requests tokens only for
//! their service accounts, and touches only its own Lease; everything else it may do is
//! upstream's NodeRules (the system:node ClusterRole), whose writes NodeRestriction admission
//! limits to its own objects. The graph of pods bound to nodes is kept from the store's watch.

use super::attributes::{selector_value, Attributes, ResourceAttributes};
use super::rbac::Rule;
use super::User;
use keelson_apimachinery::well_known::NODES_GROUP;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
    Volume,
}

/// An object a pod uses: (kind, namespace, name).
type Ref = (Kind, String, String);

#[derive(Debug)]
struct Bound {
    node: String,
    refs: Vec<Ref>,
}

/// Which objects the pods bound to each node use.
#[derive(Debug, Default)]
pub struct Graph {
    /// Store key of each bound pod -> its node and references.
    pods: HashMap<String, Bound>,
    /// (node, object) -> how many of the node's pods use it.
    edges: HashMap<(String, Ref), usize>,
    /// Claim (namespace, name) -> the PersistentVolume it is bound to (spec.volumeName).
    claim_volumes: HashMap<(String, String), String>,
    /// Node-local PersistentVolume -> the one node its nodeAffinity admits.
    volume_nodes: HashMap<String, String>,
}

impl Graph {
    /// Takes a pod's new state (None once deleted) into account.
    pub fn set_pod(&mut self, key: &str, pod: Option<&Value>) {
        if let Some(old) = self.pods.remove(key) {
            for r in old.refs {
                let edge = (old.node.clone(), r);
                if let Some(n) = self.edges.get_mut(&edge) {
                    *n -= 1;
                    if *n == 0 {
                        self.edges.remove(&edge);
                    }
                }
            }
        }
        let Some(pod) = pod else { return };
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node.is_empty() {
            return;
        }
        let refs = references(pod);
        for r in &refs {
            *self.edges.entry((node.to_string(), r.clone())).or_default() += 1;
        }
        self.pods.insert(
            key.to_string(),
            Bound {
                node: node.to_string(),
                refs,
            },
        );
    }

    /// Takes a claim's new state (None once deleted) into account: which volume it is bound to.
    pub fn set_claim(&mut self, namespace: &str, name: &str, claim: Option<&Value>) {
        let key = (namespace.to_string(), name.to_string());
        match claim.and_then(|c| text(c, "/spec/volumeName")) {
            Some(volume) => self.claim_volumes.insert(key, volume.to_string()),
            None => self.claim_volumes.remove(&key),
        };
    }

    /// Takes a volume's new state (None once deleted) into account: the node it is pinned to,
    /// when its nodeAffinity admits exactly one hostname (a local volume of that node).
    pub fn set_volume(&mut self, name: &str, volume: Option<&Value>) {
        match volume.and_then(pinned_node) {
            Some(node) => self.volume_nodes.insert(name.to_string(), node.to_string()),
            None => self.volume_nodes.remove(name),
        };
    }

    /// Whether the volume is local to `node` (its data is in that node's hands: Keelson's
    /// agent removes a local-path volume's directory and then its finalizer).
    pub fn pins(&self, node: &str, volume: &str) -> bool {
        self.volume_nodes.get(volume).is_some_and(|n| n == node)
    }

    /// Whether a pod bound to `node` uses a claim bound to the PersistentVolume `volume`, as
    /// upstream's graph links pod -> claim -> volume.
    fn uses_volume(&self, node: &str, volume: &str) -> bool {
        self.claim_volumes
            .iter()
            .any(|((ns, claim), v)| v == volume && self.has_edge(node, Kind::Claim, ns, claim))
    }

    /// Whether pod `namespace/name` is bound to `node`.
    pub fn has_pod(&self, node: &str, namespace: &str, name: &str) -> bool {
        let key = format!("/core/pods/{namespace}/{name}");
        self.pods.get(&key).is_some_and(|b| b.node == node)
    }

    pub fn has_edge(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        if kind == Kind::Volume {
            return self.uses_volume(node, name);
        }
        let edge = (
            node.to_string(),
            (kind, namespace.to_string(), name.to_string()),
        );
        self.edges.contains_key(&edge)
    }
}

/// The hostname of a nodeAffinity of one term, one `kubernetes.io/hostname In [name]`.
fn pinned_node(pv: &Value) -> Option<&str> {
    let [term] = list(pv, "/spec/nodeAffinity/required/nodeSelectorTerms") else {
        return None;
    };
    let [expr] = list(term, "/matchExpressions") else {
        return None;
    };
    let [value] = list(expr, "/values") else {
        return None;
    };
    let is_host = text(expr, "/key") == Some(keelson_apimachinery::well_known::HOSTNAME_LABEL)
        && text(expr, "/operator") == Some("In");
    is_host.then(|| value.as_str()).flatten()
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The Secrets, ConfigMaps, claims and service account a pod uses, as upstream's graph
/// populator finds them (VisitPodSecretNames, VisitPodConfigmapNames, volumes' claims).
pub fn references(pod: &Value) -> Vec<Ref> {
    let ns = text(pod, "/metadata/namespace").unwrap_or("default");
    let mut out: Vec<(Kind, &str)> = Vec::new();
    let sa = text(pod, "/spec/serviceAccountName").or_else(|| text(pod, "/spec/serviceAccount"));
    out.extend(sa.map(|s| (Kind::ServiceAccount, s)));
    for s in list(pod, "/spec/imagePullSecrets") {
        out.extend(text(s, "/name").map(|n| (Kind::Secret, n)));
    }
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in list(pod, &format!("/spec/{key}")) {
            container_refs(c, &mut out);
        }
    }
    let pod_name = text(pod, "/metadata/name").unwrap_or("");
    let mut claims = Vec::new();
    for v in list(pod, "/spec/volumes") {
        volume_refs(v, &mut out);
        if let Some(c) = text(v, "/persistentVolumeClaim/claimName") {
            claims.push(c.to_string());
        }
        if v.get("ephemeral").is_some() {
            // A generic ephemeral volume's claim is named <pod>-<volume>.
            claims.push(format!("{pod_name}-{}", text(v, "/name").unwrap_or("")));
        }
    }
    let mut refs: Vec<Ref> = out
        .into_iter()
        .map(|(k, n)| (k, ns.to_string(), n.to_string()))
        .collect();
    refs.extend(claims.into_iter().map(|c| (Kind::Claim, ns.to_string(), c)));
    refs.sort_by(|a, b| (a.1.as_str(), a.2.as_str()).cmp(&(b.1.as_str(), b.2.as_str())));
    refs.dedup();
    refs
}

fn container_refs<'a>(c: &'a Value, out: &mut Vec<(Kind, &'a str)>) {
    for e in list(c, "/env") {
        out.extend(text(e, "/valueFrom/secretKeyRef/name").map(|n| (Kind::Secret, n)));
        out.extend(text(e, "/valueFrom/configMapKeyRef/name").map(|n| (Kind::ConfigMap, n)));
    }
    for e in list(c, "/envFrom") {
        out.extend(text(e, "/secretRef/name").map(|n| (Kind::Secret, n)));
        out.extend(text(e, "/configMapRef/name").map(|n| (Kind::ConfigMap, n)));
    }
}

fn volume_refs<'a>(v: &'a Value, out: &mut Vec<(Kind, &'a str)>) {
    out.extend(text(v, "/secret/secretName").map(|n| (Kind::Secret, n)));
    out.extend(text(v, "/configMap/name").map(|n| (Kind::ConfigMap, n)));
    for s in list(v, "/projected/sources") {
        out.extend(text(s, "/secret/name").map(|n| (Kind::Secret, n)));
        out.extend(text(s, "/configMap/name").map(|n| (Kind::ConfigMap, n)));
    }
    for p in [
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/csi/nodePublishSecretRef/name",
        "/flexVolume/secretRef/name",
        "/iscsi/secretRef/name",
        "/rbd/secretRef/name",
        "/scaleIO/secretRef/name",
        "/storageos/secretRef/name",
    ] {
        out.extend(text(v, p).map(|n| (Kind::Secret, n)));
    }
}

/// The node a user is, when it is one: system:node:<name> in group system:nodes.
pub fn node_name(user: &User) -> Option<&str> {
    if !user.groups.iter().any(|g| g == NODES_GROUP) {
        return None;
    }
    user.name
        .strip_prefix("system:node:")
        .filter(|n| !n.is_empty())
}

/// Ok(reason) when the node may make the request; Err(reason) when this authorizer has no
/// opinion (not a node, or no relationship), which upstream appends to the Forbidden message.
pub fn authorize(
    graph: &Graph,
    rules: &[Rule],
    user: &User,
    a: &Attributes,
) -> Result<String, String> {
    let Some(node) = node_name(user) else {
        return Err(String::new());
    };
    let allowed = || Ok(String::new());
    if let Some(r) = &a.resource {
        let local_volume = (r.group, r.resource, r.subresource) == ("", "persistentvolumes", "");
        if local_volume && matches!(a.verb, "get" | "patch" | "update") && graph.pins(node, &r.name)
        {
            return allowed();
        }
        let kind = match (r.group, r.resource, r.subresource) {
            ("", "secrets", "") => Some(Kind::Secret),
            ("", "configmaps", "") => Some(Kind::ConfigMap),
            ("", "persistentvolumeclaims", "") => Some(Kind::Claim),
            ("", "persistentvolumes", "") => Some(Kind::Volume),
            _ => None,
        };
        if let Some(kind) = kind {
            if !matches!(a.verb, "get" | "list" | "watch") || r.name.is_empty() {
                return Err("can only read individual resources of this type".into());
            }
            return match graph.has_edge(node, kind, r.namespace, &r.name) {
                true => allowed(),
                false => Err(no_relationship(node)),
            };
        }
        match (r.group, r.resource, r.subresource) {
            ("", "pods", "") if matches!(a.verb, "get" | "list" | "watch") => {
                return pod_read(graph, node, a.verb, r);
            }
            ("", "serviceaccounts", "token") => {
                if a.verb != "create" || r.name.is_empty() {
                    return Err("can only create tokens for individual service accounts".into());
                }
                return match graph.has_edge(node, Kind::ServiceAccount, r.namespace, &r.name) {
                    true => allowed(),
                    false => Err(no_relationship(node)),
                };
            }
            ("coordination.k8s.io", "leases", _) => {
                return lease(node, a.verb, r.namespace, &r.name)
            }
            _ => {}
        }
    }
    match rules.iter().any(|rule| rule.allows(a)) {
        true => allowed(),
        false => Err(String::new()),
    }
}

/// Upstream's AuthorizeNodeWithSelectors: a node lists and watches only the pods bound to it
/// (by the spec.nodeName field selector) and reads single pods only when bound to it.
fn pod_read(
    graph: &Graph,
    node: &str,
    verb: &str,
    r: &ResourceAttributes,
) -> Result<String, String> {
    let own = selector_value(&r.field_selector, "spec.nodeName") == Some(node);
    if verb != "get" && own {
        return Ok(String::new());
    }
    if r.name.is_empty() {
        return Err("can only list/watch pods with spec.nodeName field selector".into());
    }
    match graph.has_pod(node, r.namespace, &r.name) {
        true => Ok(String::new()),
        false => Err(no_relationship(node)),
    }
}

fn no_relationship(node: &str) -> String {
    format!("no relationship found between node '{node}' and this object")
}

/// A node's Lease: in kube-node-lease, of its own name (a create's name is in the body, which
/// NodeRestriction admission checks).
fn lease(node: &str, verb: &str, namespace: &str, name: &str) -> Result<String, String> {
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return Err("can only get, create, update, patch, or delete a node lease".into());
    }
    if namespace != "kube-node-lease" {
        return Err("can only access leases in this namespace: kube-node-lease".into());
    }
    if verb != "create" && name != node {
        return Err("can only access node lease with the same name as the requesting node".into());
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests;
