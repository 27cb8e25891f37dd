//! Static pods, as the kubelet's file source (`--pod-manifest-path`): each Pod manifest in the
//! directory runs on this node without the API server, under the name `<name>-<node>` and a UID
//! hashed from the manifest and the node; and while the API server answers, a mirror pod shows
//! it there (annotation kubernetes.io/config.mirror, owned by the Node). Parsing is pure
//! (`from_manifest`, `mirror_of`); `source` reads the directory and keeps the mirror pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use keelson_apimachinery::hash::fnv1a_64;

pub mod source;

pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
pub const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Whether the API's pod is the mirror of a static pod (never run from the API).
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

/// The static pod a manifest file describes on `node`.
pub fn from_manifest(text: &str, file: &str, node: &str) -> Result<Pod, String> {
    let value: serde_json::Value =
        serde_norway::from_str(text).map_err(|e| format!("{file}: not YAML or JSON: {e}"))?;
    let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    if kind != "Pod" {
        return Err(format!(
            "{file}: kind {kind:?}: only a Pod runs as a static pod"
        ));
    }
    let mut pod: Pod =
        serde_json::from_value(value).map_err(|e| format!("{file}: not a Pod: {e}"))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(format!("{file}: metadata.name is required"));
    }
    let spec = pod
        .spec
        .as_mut()
        .ok_or_else(|| format!("{file}: spec is required"))?;
    spec.node_name = Some(node.to_string());
    // The UID: the same manifest on the same node is the same pod across agent restarts.
    let uid = format!(
        "{:016x}",
        fnv1a_64(format!("{node}\n{file}\n{text}").as_bytes())
    );
    let m = &mut pod.metadata;
    m.name = Some(format!("{name}-{node}"));
    m.namespace = Some(
        m.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or("default".into()),
    );
    m.uid = Some(uid.clone());
    let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(SOURCE_ANNOTATION.into(), "file".into());
    annotations.insert(HASH_ANNOTATION.into(), uid);
    pod.status = None;
    Ok(pod)
}

/// The mirror pod of a static pod: its metadata and spec, marked and owned by the Node.
pub fn mirror_of(pod: &Pod, node: &Node) -> Pod {
    let mut mirror = Pod {
        metadata: pod.metadata.clone(),
        spec: pod.spec.clone(),
        status: None,
    };
    let m = &mut mirror.metadata;
    m.uid = None;
    let hash = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HASH_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    m.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(MIRROR_ANNOTATION.into(), hash);
    m.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        ..Default::default()
    }]);
    mirror
}
#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n";

    #[test]
    fn a_manifest_becomes_a_pod_of_this_node_with_a_stable_uid() {
        let pod = from_manifest(MANIFEST, "/etc/m/web.yaml", "n1").unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-n1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
        let again = from_manifest(MANIFEST, "/etc/m/web.yaml", "n1").unwrap();
        assert_eq!(pod.metadata.uid, again.metadata.uid, "stable across reads");
        let changed = MANIFEST.replace("busybox", "busybox:2");
        let other = from_manifest(&changed, "/etc/m/web.yaml", "n1").unwrap();
        assert_ne!(
            pod.metadata.uid, other.metadata.uid,
            "a new version is a new pod"
        );
        let a = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[SOURCE_ANNOTATION], "file");
        assert_eq!(Some(&a[HASH_ANNOTATION]), pod.metadata.uid.as_ref());
    }

    #[test]
    fn what_is_not_a_pod_is_refused_with_the_file_named() {
        let err = from_manifest("kind: Deployment\n", "d.yaml", "n1").unwrap_err();
        assert!(err.starts_with("d.yaml: kind \"Deployment\""), "{err}");
        let err = from_manifest("kind: Pod\nspec: {containers: []}\n", "x.yaml", "n1").unwrap_err();
        assert!(err.contains("metadata.name is required"), "{err}");
        assert!(from_manifest(": : :", "bad.yaml", "n1")
            .unwrap_err()
            .starts_with("bad.yaml: not YAML"));
    }

    #[test]
    fn the_mirror_pod_is_marked_and_owned_by_the_node() {
        let pod = from_manifest(MANIFEST, "web.yaml", "n1").unwrap();
        let node: Node = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "n1", "uid": "node-uid"}}),
        )
        .unwrap();
        let m = mirror_of(&pod, &node);
        assert!(is_mirror(&m) && !is_mirror(&pod));
        assert_eq!(m.metadata.uid, None);
        assert_eq!(
            m.metadata.annotations.as_ref().unwrap()[MIRROR_ANNOTATION],
            pod.metadata.uid.clone().unwrap()
        );
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Node", "node-uid")
        );
    }
}
