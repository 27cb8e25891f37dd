//! Volume binding, as upstream's VolumeBinding plugin: a Pod's claims must exist; a bound claim
//! limits the Pod to the nodes its PersistentVolume admits; an unbound claim of a
//! WaitForFirstConsumer class is bound after the node is chosen (the claim gets the
//! selected-node annotation, the binder provisions or binds on that node, and the Pod is bound
//! once its claims are); any other unbound claim keeps the Pod Pending.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use keelson_apimachinery::volume_match::{admits_node, available_for, fits};
use keelson_apimachinery::well_known::SELECTED_NODE_ANNOTATION;
use kube::api::{Api, Patch, PatchParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The claims, volumes and classes as the scheduler's watches last saw them.
#[derive(Default)]
pub struct Snapshot {
    pub claims: Vec<Arc<PersistentVolumeClaim>>,
    pub volumes: Vec<Arc<PersistentVolume>>,
    pub classes: Vec<Arc<StorageClass>>,
}

/// What a Pod's claims ask of its node.
#[derive(Debug, Default, Clone)]
pub struct PodVolumes {
    /// Volumes of bound claims: the node must be in their nodeAffinity.
    pub bound: Vec<PersistentVolume>,
    /// Unbound WaitForFirstConsumer claims.
    pub delayed: Vec<Delayed>,
}

impl PodVolumes {
    /// No claims: nothing for VolumeBinding to check.
    pub fn is_empty(&self) -> bool {
        self.bound.is_empty() && self.delayed.is_empty()
    }
}

/// An unbound WaitForFirstConsumer claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Delayed {
    pub namespace: String,
    pub name: String,
    /// The node already chosen for it, if any.
    pub selected: Option<String>,
    /// Its class provisions nothing (kubernetes.io/no-provisioner): the node must hold one of
    /// `candidates`.
    pub static_only: bool,
    /// Available volumes that fit the claim, wherever they are.
    pub candidates: Vec<PersistentVolume>,
}

/// Upstream's provisioner name of classes whose volumes are only made by hand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
pub const NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const SELECTED_ELSEWHERE: &str = "node(s) didn't find available persistent volumes to bind";

fn claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

/// The Pod's claims resolved, or why no node can take it now (upstream's PreFilter messages).
pub fn resolve(pod: &Pod, snap: &Snapshot) -> Result<PodVolumes, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = PodVolumes::default();
    let mut unbound_immediate = false;
    for name in claim_names(pod) {
        let claim = snap
            .claims
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(ns)
                    && c.metadata.name.as_deref() == Some(name)
            })
            .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        let spec = claim.spec.clone().unwrap_or_default();
        if let Some(volume) = spec.volume_name.filter(|v| !v.is_empty()) {
            let pv = snap
                .volumes
                .iter()
                .find(|v| v.metadata.name.as_deref() == Some(volume.as_str()))
                .ok_or_else(|| format!("persistentvolume \"{volume}\" not found"))?;
            out.bound.push((**pv).clone());
            continue;
        }
        let class = spec.storage_class_name.as_deref().unwrap_or("");
        let delayed = snap.classes.iter().find(|c| {
            c.metadata.name.as_deref() == Some(class)
                && c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        });
        if let Some(class) = delayed {
            let selected = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE_ANNOTATION))
                .cloned();
            let candidates = snap
                .volumes
                .iter()
                .filter(|pv| available_for(claim, pv) && fits(claim, pv))
                .map(|pv| (**pv).clone())
                .collect();
            out.delayed.push(Delayed {
                namespace: ns.to_string(),
                name: name.to_string(),
                selected,
                static_only: class.provisioner == NO_PROVISIONER,
                candidates,
            });
        } else {
            unbound_immediate = true;
        }
    }
    match unbound_immediate {
        true => Err(UNBOUND_IMMEDIATE.into()),
        false => Ok(out),
    }
}

/// Why the node cannot serve the Pod's volumes, or None.
pub fn unfit(vols: &PodVolumes, node: &Node) -> Option<&'static str> {
    let name = node.metadata.name.as_deref().unwrap_or("");
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let admits = |pv: &PersistentVolume| admits_node(pv, name, labels);
    if !vols.bound.iter().all(admits) {
        return Some(NODE_CONFLICT);
    }
    // A node was already chosen for the claim (its volume may be there already), or only
    // volumes made by hand can serve it and none is on this node.
    let no_volume_here = |d: &Delayed| {
        d.selected.as_deref().is_some_and(|s| s != name)
            || (d.static_only && !d.candidates.iter().any(admits))
    };
    if vols.delayed.iter().any(no_volume_here) {
        return Some(SELECTED_ELSEWHERE);
    }
    None
}

/// How long a Pod waits for the binder to bind its WaitForFirstConsumer claims before it is
/// tried again (upstream waits up to --bind-timeout-seconds, 600 s, in the same way).
const BIND_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("claim {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("claim {namespace}/{name} was not bound within {BIND_TIMEOUT:?}")]
    Timeout { namespace: String, name: String },
}

/// Writes the chosen node on each delayed claim, then waits until the binder bound them.
pub async fn bind_claims(
    client: &kube::Client,
    node: &str,
    vols: &PodVolumes,
) -> Result<(), BindError> {
    let deadline = tokio::time::Instant::now() + BIND_TIMEOUT;
    for Delayed {
        namespace,
        name,
        selected,
        ..
    } in &vols.delayed
    {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        let err = |source| BindError::Api {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        };
        if selected.as_deref() != Some(node) {
            let patch =
                serde_json::json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(err)?;
        }
        loop {
            let claim = api.get(name).await.map_err(err)?;
            let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            if bound {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BindError::Timeout {
                    namespace: namespace.clone(),
                    name: name.clone(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshot() -> Snapshot {
        let claim = |name: &str, class: &str, volume: Option<&str>| -> Arc<PersistentVolumeClaim> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
                    "spec": {"storageClassName": class, "volumeName": volume}}))
                .unwrap(),
            )
        };
        let class = |name: &str, mode: &str| -> Arc<StorageClass> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": "p",
                    "volumeBindingMode": mode}))
                .unwrap(),
            )
        };
        let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv-n2"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}}}))
        .unwrap();
        Snapshot {
            claims: vec![
                claim("late", "local-path", None),
                claim("now", "fast", None),
                claim("missing-class", "nope", None),
                claim("bound", "local-path", Some("pv-n2")),
            ],
            volumes: vec![Arc::new(pv)],
            classes: vec![
                class("local-path", "WaitForFirstConsumer"),
                class("fast", "Immediate"),
            ],
        }
    }

    fn pod(claims: &[&str]) -> Pod {
        let volumes: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [], "volumes": volumes}}))
        .unwrap()
    }

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"kubernetes.io/hostname": name}}}))
        .unwrap()
    }

    #[test]
    fn unbound_immediate_and_missing_claims_keep_the_pod_pending() {
        let snap = snapshot();
        assert_eq!(
            resolve(&pod(&["now"]), &snap).unwrap_err(),
            UNBOUND_IMMEDIATE
        );
        assert_eq!(
            resolve(&pod(&["missing-class"]), &snap).unwrap_err(),
            UNBOUND_IMMEDIATE
        );
        assert_eq!(
            resolve(&pod(&["gone"]), &snap).unwrap_err(),
            "persistentvolumeclaim \"gone\" not found"
        );
    }

    #[test]
    fn bound_volumes_pin_the_node_and_delayed_claims_wait_for_it() {
        let snap = snapshot();
        let vols = resolve(&pod(&["bound", "late"]), &snap).unwrap();
        assert_eq!(unfit(&vols, &node("n1")), Some(NODE_CONFLICT));
        assert_eq!(unfit(&vols, &node("n2")), None);
        let late = &vols.delayed[0];
        assert_eq!((late.name.as_str(), late.selected.as_ref()), ("late", None));
        assert!(!late.static_only);
    }
    /// A class that provisions nothing: only nodes holding a fitting Available volume will do.
    #[test]
    fn static_local_volumes_choose_the_node() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "disk", "namespace": "default"},
            "spec": {"storageClassName": "local-storage", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}))
        .unwrap();
        let class: StorageClass = serde_json::from_value(json!({"metadata": {"name": "local-storage"},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}))
        .unwrap();
        let local = |name: &str, node: &str, size: &str| -> Arc<PersistentVolume> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
                "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local-storage", "local": {"path": "/mnt/disk"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}))
                .unwrap(),
            )
        };
        let snap = Snapshot {
            claims: vec![Arc::new(claim)],
            volumes: vec![
                local("small-on-n1", "n1", "100Mi"),
                local("on-n2", "n2", "10Gi"),
            ],
            classes: vec![Arc::new(class)],
        };
        let vols = resolve(&pod(&["disk"]), &snap).unwrap();
        assert_eq!(unfit(&vols, &node("n1")), Some(SELECTED_ELSEWHERE));
        assert_eq!(unfit(&vols, &node("n2")), None);
    }
}
