//! The bootstrap policy: the default ClusterRoles and bindings, written at every start
//! (created when missing; roles get missing rules and bindings missing subjects back unless
//! annotated rbac.authorization.kubernetes.io/autoupdate=false), as upstream's
//! storage_rbac post-start hook reconciles them.

mod controllers;
pub mod roles;

use crate::rbac::{Rule, RBAC_GROUP};
use keelson_apimachinery::well_known::{
    AUTHENTICATED_GROUP, BOOTSTRAPPERS_GROUP, BOOTSTRAPPING_LABEL, CLUSTER_INFO_CONFIGMAP,
    MASTERS_GROUP, NODES_GROUP, RBAC_AUTOUPDATE_ANNOTATION, UNAUTHENTICATED_GROUP,
};
use serde_json::{json, Value};

const CSR_NODE_CLIENT: &str = "system:certificates.k8s.io:certificatesigningrequests:nodeclient";
const CSR_SELF_NODE_CLIENT: &str =
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient";
/// kubeadm's Role letting anyone read kube-public/cluster-info.
const CLUSTER_INFO_ROLE: &str = "kubeadm:bootstrap-signer-clusterinfo";
/// keelson-proxy's LoadBalancer speakers: each renews its Lease in kube-system and reads the
/// others' (the proxy runs as system:kube-proxy, or with its node's credentials on a joined node).
pub const SPEAKER_ROLE: &str = "keelson:load-balancer-speaker";

/// A binding's subject: ("User" | "Group", name) or ("ServiceAccount", "ns/name").
type Subject = (&'static str, String);

fn user(name: &str) -> Subject {
    ("User", name.to_string())
}

fn group(name: &str) -> Subject {
    ("Group", name.to_string())
}

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({
        "name": name,
        "labels": { BOOTSTRAPPING_LABEL: "rbac-defaults" },
        "annotations": { RBAC_AUTOUPDATE_ANNOTATION: "true" },
    });
    if let Some(ns) = namespace {
        keelson_apimachinery::object::set_path(&mut m, &["namespace"], json!(ns));
    }
    m
}

fn role(kind: &str, name: &str, namespace: Option<&str>, rules: &[Rule]) -> Value {
    let rules: Vec<Value> = rules.iter().map(Rule::to_value).collect();
    json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": meta(name, namespace), "rules": rules })
}

fn subject_value((kind, name): &Subject) -> Value {
    match (*kind, name.split_once('/')) {
        ("ServiceAccount", Some((ns, n))) => {
            json!({ "kind": "ServiceAccount", "name": n, "namespace": ns })
        }
        _ => json!({ "kind": kind, "apiGroup": RBAC_GROUP, "name": name }),
    }
}

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    role_kind: &str,
    role: &str,
    subjects: &[Subject],
) -> Value {
    let subjects: Vec<Value> = subjects.iter().map(subject_value).collect();
    json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": meta(name, namespace),
        "roleRef": { "apiGroup": RBAC_GROUP, "kind": role_kind, "name": role },
        "subjects": subjects })
}

/// Every default ClusterRole, by name.
pub fn cluster_roles() -> Vec<(String, Vec<Rule>)> {
    let mut out: Vec<(String, Vec<Rule>)> = [
        ("cluster-admin", roles::cluster_admin()),
        ("admin", roles::admin()),
        ("edit", roles::edit()),
        ("view", roles::view()),
        (
            "system:aggregated-metrics-reader",
            roles::aggregated_metrics_reader(),
        ),
        ("system:discovery", roles::discovery()),
        ("system:basic-user", roles::basic_user()),
        ("system:public-info-viewer", roles::public_info_viewer()),
        ("system:monitoring", roles::monitoring()),
        ("system:node", roles::node()),
        ("system:node-bootstrapper", roles::node_bootstrapper()),
        (CSR_NODE_CLIENT, roles::csr_node_client()),
        (CSR_SELF_NODE_CLIENT, roles::csr_self_node_client()),
        ("system:node-proxier", roles::node_proxier()),
        ("keelson:network-policy", roles::network_policy()),
        ("system:kubelet-api-admin", roles::kubelet_api_admin()),
        ("system:kube-scheduler", roles::scheduler()),
        (
            "system:kube-controller-manager",
            controllers::kube_controller_manager(),
        ),
        ("keelson:ingress-controller", roles::ingress_controller()),
        ("system:coredns", roles::coredns()),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_string(), r))
    .collect();
    for (name, rules) in controllers::controller_roles() {
        out.push((format!("system:controller:{name}"), rules));
    }
    out
}

/// Every default ClusterRoleBinding: (binding name, ClusterRole, subjects).
fn cluster_role_bindings() -> Vec<(String, String, Vec<Subject>)> {
    let mut out: Vec<(String, String, Vec<Subject>)> = [
        ("cluster-admin", vec![group(MASTERS_GROUP)]),
        ("system:discovery", vec![group(AUTHENTICATED_GROUP)]),
        ("system:basic-user", vec![group(AUTHENTICATED_GROUP)]),
        (
            "system:public-info-viewer",
            vec![group(AUTHENTICATED_GROUP), group(UNAUTHENTICATED_GROUP)],
        ),
        ("system:monitoring", vec![group("system:monitoring")]),
        ("system:node-bootstrapper", vec![group(BOOTSTRAPPERS_GROUP)]),
        (CSR_NODE_CLIENT, vec![group(BOOTSTRAPPERS_GROUP)]),
        (CSR_SELF_NODE_CLIENT, vec![group(NODES_GROUP)]),
        // Keelson-only: on joined machines the proxy runs with the node's credentials.
        (
            "system:node-proxier",
            vec![user("system:kube-proxy"), group(NODES_GROUP)],
        ),
        // The NetworkPolicy enforcer runs on every node, as the proxy's identity or (joined
        // machines) the node's: peers are selected cluster-wide, so it reads every pod. This
        // gives each node what a policy agent's DaemonSet ServiceAccount gives it upstream
        // (Calico, Cilium, kube-router: the node holds that token); secrets, config maps and
        // writes stay limited to the node's own pods.
        (
            "keelson:network-policy",
            vec![user("system:kube-proxy"), group(NODES_GROUP)],
        ),
        (
            "system:kubelet-api-admin",
            vec![user("kube-apiserver-kubelet-client")],
        ),
        ("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        (
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        (
            "keelson:ingress-controller",
            vec![user("keelson:ingress-controller")],
        ),
        // keelson-dns pods run as kube-system/kube-dns (scripts/up), a process outside the
        // cluster as system:kube-dns; CoreDNS as upstream's account.
        (
            "system:coredns",
            vec![
                user("system:kube-dns"),
                ("ServiceAccount", "kube-system/kube-dns".to_string()),
                ("ServiceAccount", "kube-system/coredns".to_string()),
            ],
        ),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), n.to_string(), s))
    .collect();
    // Keelson's controller manager runs every controller under its own identity (upstream's
    // without --use-service-account-credentials); the service accounts are bound as upstream.
    for (name, _) in controllers::controller_roles() {
        let full = format!("system:controller:{name}");
        let subjects = vec![
            user("system:kube-controller-manager"),
            ("ServiceAccount", format!("kube-system/{name}")),
        ];
        out.push((full.clone(), full, subjects));
    }
    out
}

/// Every default object as (kind, JSON), roles before the bindings that name them.
pub fn objects() -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for (name, rules) in cluster_roles() {
        out.push(("ClusterRole", role("ClusterRole", &name, None, &rules)));
    }
    let info = Rule::resources(&["get"], &[""], &["configmaps"]).named(&[CLUSTER_INFO_CONFIGMAP]);
    out.push((
        "Role",
        role("Role", CLUSTER_INFO_ROLE, Some("kube-public"), &[info]),
    ));
    let leases = Rule::resources(
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
        &["coordination.k8s.io"],
        &["leases"],
    );
    out.push((
        "Role",
        role("Role", SPEAKER_ROLE, Some("kube-system"), &[leases]),
    ));
    for (name, role_name, subjects) in cluster_role_bindings() {
        out.push((
            "ClusterRoleBinding",
            binding(
                "ClusterRoleBinding",
                &name,
                None,
                "ClusterRole",
                &role_name,
                &subjects,
            ),
        ));
    }
    let anonymous = [user("system:anonymous")];
    out.push((
        "RoleBinding",
        binding(
            "RoleBinding",
            CLUSTER_INFO_ROLE,
            Some("kube-public"),
            "Role",
            CLUSTER_INFO_ROLE,
            &anonymous,
        ),
    ));
    let speakers = [user("system:kube-proxy"), group("system:nodes")];
    out.push((
        "RoleBinding",
        binding(
            "RoleBinding",
            SPEAKER_ROLE,
            Some("kube-system"),
            "Role",
            SPEAKER_ROLE,
            &speakers,
        ),
    ));
    out
}

/// The union of what is stored and what the default holds: missing rules or subjects added,
/// labels and annotations filled in. None when nothing is missing or the object is annotated
/// autoupdate=false.
pub fn reconciled(existing: &Value, default: &Value) -> Option<Value> {
    let annotation = format!(
        "/metadata/annotations/{}",
        RBAC_AUTOUPDATE_ANNOTATION.replace('/', "~1")
    );
    if existing.pointer(&annotation).and_then(Value::as_str) == Some("false") {
        return None;
    }
    let mut out = existing.clone();
    let mut changed = false;
    for list in ["rules", "subjects"] {
        let Some(want) = default.get(list).and_then(Value::as_array) else {
            continue;
        };
        let have = existing
            .get(list)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut merged = have.clone();
        for item in want {
            let present = match list {
                "rules" => have
                    .iter()
                    .any(|h| Rule::from_value(h) == Rule::from_value(item)),
                _ => have.contains(item),
            };
            if !present {
                merged.push(item.clone());
            }
        }
        if merged.len() != have.len() {
            keelson_apimachinery::object::set_path(&mut out, &[list], json!(merged));
            changed = true;
        }
    }
    for field in ["labels", "annotations"] {
        let want = default
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object);
        for (k, v) in want.into_iter().flatten() {
            let path = format!("/metadata/{field}/{}", k.replace('/', "~1"));
            if existing.pointer(&path).is_none() {
                keelson_apimachinery::object::set_path(
                    &mut out,
                    &["metadata", field, k],
                    v.clone(),
                );
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests;
