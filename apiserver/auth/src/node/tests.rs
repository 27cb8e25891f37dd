use super::*;
use crate::policy::roles;
use serde_json::json;
use std::borrow::Cow;

fn node(name: &str) -> User {
    User {
        name: format!("system:node:{name}"),
        uid: String::new(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
    }
}

fn req<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes::on_resource(verb, group, resource, sub, ns, name)
}

fn pod(name: &str, node: &str, secret: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": node, "serviceAccountName": "web",
        "imagePullSecrets": [{"name": "registry"}],
        "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "a"}}}],
            "envFrom": [{"secretRef": {"name": "env-secret"}}]}],
        "volumes": [{"name": "v", "secret": {"secretName": secret}},
            {"name": "p", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}})
}

#[test]
fn pods_reference_what_they_use() {
    let refs = references(&pod("a", "n1", "tls"));
    let names: Vec<(Kind, &str)> = refs.iter().map(|(k, _, n)| (*k, n.as_str())).collect();
    for want in [
        (Kind::ServiceAccount, "web"),
        (Kind::Secret, "registry"),
        (Kind::Secret, "env-secret"),
        (Kind::Secret, "tls"),
        (Kind::ConfigMap, "env-cm"),
        (Kind::ConfigMap, "kube-root-ca.crt"),
        (Kind::Claim, "data"),
    ] {
        assert!(names.contains(&want), "{want:?} in {names:?}");
    }
}

#[test]
fn a_node_reads_only_what_its_pods_use() {
    let mut g = Graph::default();
    g.set_pod("/core/pods/default/a", Some(&pod("a", "n1", "mine")));
    g.set_pod("/core/pods/default/b", Some(&pod("b", "n2", "theirs")));
    let rules = roles::node();
    let n1 = node("n1");
    let get = |name| {
        authorize(
            &g,
            &rules,
            &n1,
            &req("get", "", "secrets", "", "default", name),
        )
    };
    assert_eq!(get("mine"), Ok(String::new()));
    assert_eq!(
        get("theirs"),
        Err("no relationship found between node 'n1' and this object".into())
    );
    assert!(get("registry").is_ok(), "used by pods on both nodes");
    let list = authorize(
        &g,
        &rules,
        &n1,
        &req("list", "", "secrets", "", "default", ""),
    );
    assert!(list.is_err(), "no listing of all Secrets");
    let token = req("create", "", "serviceaccounts", "token", "default", "web");
    assert!(authorize(&g, &rules, &n1, &token).is_ok());
    assert!(authorize(&g, &rules, &node("n3"), &token).is_err());
    // Its pod moved away or was deleted: the edge is gone.
    g.set_pod("/core/pods/default/a", None);
    assert!(authorize(
        &g,
        &rules,
        &n1,
        &req("get", "", "secrets", "", "default", "mine")
    )
    .is_err());
    assert!(authorize(
        &g,
        &rules,
        &n1,
        &req("get", "", "secrets", "", "default", "registry")
    )
    .is_err());
    assert!(authorize(
        &g,
        &rules,
        &node("n2"),
        &req("get", "", "secrets", "", "default", "registry")
    )
    .is_ok());
}

#[test]
fn leases_and_node_rules() {
    let g = Graph::default();
    let rules = roles::node();
    let n1 = node("n1");
    let lease = |verb, ns, name| {
        authorize(
            &g,
            &rules,
            &n1,
            &req(verb, "coordination.k8s.io", "leases", "", ns, name),
        )
    };
    assert!(lease("update", "kube-node-lease", "n1").is_ok());
    assert!(lease("create", "kube-node-lease", "").is_ok());
    assert!(lease("update", "kube-node-lease", "n2").is_err());
    assert!(lease("get", "default", "n1").is_err());
    assert!(lease("list", "kube-node-lease", "").is_err());
    let r = |verb, res, sub| authorize(&g, &rules, &n1, &req(verb, "", res, sub, "", ""));
    assert!(r("patch", "nodes", "status").is_ok());
    assert!(
        r("watch", "pods", "").is_err(),
        "only with its spec.nodeName selector"
    );
    assert!(r("delete", "namespaces", "").is_err());
    assert!(r("create", "deployments", "").is_err());
    let not_a_node = User {
        groups: vec![],
        ..node("n1")
    };
    assert_eq!(node_name(&not_a_node), None);
    assert_eq!(
        authorize(&g, &rules, &not_a_node, &req("get", "", "pods", "", "", "")),
        Err(String::new())
    );
}

#[test]
fn a_node_lists_and_reads_only_its_own_pods() {
    let mut g = Graph::default();
    g.set_pod("/core/pods/default/a", Some(&pod("a", "n1", "mine")));
    g.set_pod("/core/pods/default/b", Some(&pod("b", "n2", "theirs")));
    let rules = roles::node();
    let n1 = node("n1");
    let read = |verb, name, selector: &'static str| {
        let mut a = req(verb, "", "pods", "", "default", name);
        if let Some(r) = a.resource.as_mut() {
            r.field_selector = Cow::Borrowed(selector);
        }
        authorize(&g, &rules, &n1, &a)
    };
    assert!(read("watch", "", "spec.nodeName=n1").is_ok());
    assert!(read("list", "", "spec.nodeName==n1").is_ok());
    assert_eq!(
        read("list", "", ""),
        Err("can only list/watch pods with spec.nodeName field selector".into())
    );
    assert!(read("list", "", "spec.nodeName=n2").is_err());
    assert!(read("list", "", "spec.nodeName=n1,metadata.namespace=x").is_err());
    assert!(read("get", "a", "").is_ok());
    assert!(read("get", "b", "").is_err());
    assert!(read("watch", "a", "metadata.name=a").is_ok());
    // Writes go through the node rules (and NodeRestriction).
    let status = req("patch", "", "pods", "status", "default", "b");
    assert!(authorize(&g, &rules, &n1, &status).is_ok());
}

/// A node reads the PersistentVolume only through a claim of one of its pods bound to it.
#[test]
fn a_node_reads_the_volumes_of_its_pods_claims() {
    let mut g = Graph::default();
    g.set_pod("/core/pods/default/a", Some(&pod("a", "n1", "mine")));
    let rules = roles::node();
    let get = |g: &Graph, n: &str, name: &str| {
        authorize(
            g,
            &rules,
            &node(n),
            &req("get", "", "persistentvolumes", "", "", name),
        )
    };
    assert!(get(&g, "n1", "pv-1").is_err(), "the claim is not bound yet");
    g.set_claim(
        "default",
        "data",
        Some(&json!({"spec": {"volumeName": "pv-1"}})),
    );
    assert_eq!(get(&g, "n1", "pv-1"), Ok(String::new()));
    assert!(get(&g, "n1", "pv-2").is_err());
    assert!(
        get(&g, "n2", "pv-1").is_err(),
        "no pod of n2 uses the claim"
    );
    let list = authorize(
        &g,
        &rules,
        &node("n1"),
        &req("list", "", "persistentvolumes", "", "", ""),
    );
    assert!(list.is_err());
    g.set_claim("default", "data", None);
    assert!(get(&g, "n1", "pv-1").is_err());
}

/// A node reads and patches (to drop its finalizer) the local volumes pinned to it, only.
#[test]
fn a_node_manages_the_local_volumes_pinned_to_it() {
    let mut g = Graph::default();
    let local = |node: &str| {
        json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})
    };
    g.set_volume("pvc-1", Some(&local("n1")));
    g.set_volume(
        "shared",
        Some(&json!({"spec": {"nfs": {"server": "s", "path": "/"}}})),
    );
    let rules = roles::node();
    let may = |g: &Graph, n: &str, verb: &str, name: &str| {
        authorize(
            g,
            &rules,
            &node(n),
            &req(verb, "", "persistentvolumes", "", "", name),
        )
        .is_ok()
    };
    assert!(may(&g, "n1", "get", "pvc-1"));
    assert!(may(&g, "n1", "patch", "pvc-1"));
    assert!(!may(&g, "n1", "delete", "pvc-1"));
    assert!(!may(&g, "n2", "patch", "pvc-1"));
    assert!(!may(&g, "n1", "patch", "shared"));
    g.set_volume("pvc-1", None);
    assert!(!may(&g, "n1", "get", "pvc-1"));
}
