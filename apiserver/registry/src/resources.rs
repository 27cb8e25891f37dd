//! The kinds served, with their scope: the one table that routing, discovery, storage and the
//! per-kind rules read.

use crate::schema::{decode, Decode};
use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, certificates, coordination, core,
    discovery, networking, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use std::sync::RwLock;

/// One served resource (a REST collection), as discovery describes it.
#[derive(Clone, Copy)]
pub struct Resource {
    /// API group; "" for the legacy core group.
    pub group: &'static str,
    pub version: &'static str,
    /// Plural name used in URLs, e.g. "pods".
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Subresources other than the resource itself, e.g. ["status", "scale"].
    pub subresources: &'static [&'static str],
    /// In the "all" category, so `kubectl get all` lists it.
    pub in_all: bool,
    /// Decodes an object into this kind's k8s-openapi type: what every write must pass.
    pub decode: Decode,
}

/// Identity is the URL's group, version and plural (the decoder is not compared).
impl PartialEq for Resource {
    fn eq(&self, other: &Resource) -> bool {
        (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
    }
}

impl Eq for Resource {}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Resource({}/{})", self.api_version(), self.plural)
    }
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Prefix of this resource's keys in the store; namespace and name follow.
    pub fn key_prefix(&self) -> String {
        let g = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        format!("/{g}/{}/", self.plural)
    }

    pub fn key(&self, namespace: &str, name: &str) -> String {
        format!("{}{namespace}/{name}", self.key_prefix())
    }

    pub fn verbs(&self) -> &'static [&'static str] {
        if self.is_metrics() {
            return &["get", "list"];
        }
        match self.is_review() {
            true => &["create"],
            false => &VERBS,
        }
    }

    /// metrics.k8s.io: read from the agents on each request, never stored (as metrics-server).
    pub fn is_metrics(&self) -> bool {
        self.group == METRICS_GROUP
    }

    /// A review (TokenReview, SubjectAccessReview, ...): created to get an answer, never stored.
    pub fn is_review(&self) -> bool {
        matches!(self.group, "authentication.k8s.io" | "authorization.k8s.io")
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    /// Whether writes to the main resource ignore `.status` (it has a status subresource).
    pub fn has_status(&self) -> bool {
        self.has_subresource("status")
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

pub const METRICS_GROUP: &str = "metrics.k8s.io";

/// NodeMetrics and PodMetrics are answers, not objects: no write reaches the store.
fn not_stored(_: &serde_json::Value) -> Result<(), crate::Cause> {
    Err(crate::Cause::forbidden(
        "metadata",
        "metrics.k8s.io objects are read-only",
    ))
}

macro_rules! res {
    ($g:expr, $v:expr, $p:expr, $s:expr, $k:expr, $ns:expr, $short:expr, $sub:expr, $all:expr, $t:ty) => {
        Resource {
            group: $g,
            version: $v,
            plural: $p,
            singular: $s,
            kind: $k,
            namespaced: $ns,
            short_names: $short,
            subresources: $sub,
            in_all: $all,
            decode: decode::<$t>,
        }
    };
}

/// A metrics.k8s.io/v1beta1 resource (`kubectl top`).
const fn metrics(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group: METRICS_GROUP,
        version: "v1beta1",
        plural,
        singular,
        kind,
        namespaced,
        short_names: &[],
        subresources: &[],
        in_all: false,
        decode: not_stored,
    }
}

pub static RESOURCES: &[Resource] = &[
    res!(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        &["status"],
        false,
        core::v1::Namespace
    ),
    res!(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        &["status"],
        false,
        core::v1::Node
    ),
    res!(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        &[
            "status",
            "binding",
            "log",
            "eviction",
            "exec",
            "attach",
            "portforward"
        ],
        true,
        core::v1::Pod
    ),
    res!(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        &["status"],
        true,
        core::v1::Service
    ),
    res!(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        &[],
        false,
        core::v1::Endpoints
    ),
    res!(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        &[],
        false,
        core::v1::ConfigMap
    ),
    res!(
        "",
        "v1",
        "secrets",
        "secret",
        "Secret",
        true,
        &[],
        &[],
        false,
        core::v1::Secret
    ),
    res!(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        &[],
        false,
        core::v1::Event
    ),
    res!(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        &["token"],
        false,
        core::v1::ServiceAccount
    ),
    res!(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
        &[],
        false,
        discovery::v1::EndpointSlice
    ),
    res!(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        &["status", "scale"],
        true,
        apps::v1::Deployment
    ),
    res!(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        &["status", "scale"],
        true,
        apps::v1::ReplicaSet
    ),
    res!(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        &["status"],
        true,
        apps::v1::DaemonSet
    ),
    res!(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
        &["status", "scale"],
        true,
        apps::v1::StatefulSet
    ),
    res!(
        "apps",
        "v1",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
        true,
        &[],
        &[],
        false,
        apps::v1::ControllerRevision
    ),
    res!(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        &["status"],
        true,
        autoscaling::v2::HorizontalPodAutoscaler
    ),
    // Older clients' form (`kubectl autoscale` writes v1), converted to the stored v2 form:
    // see `autoscaling_v1`. After v2, so v2 is the group's preferred version.
    res!(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        &["status"],
        true,
        autoscaling::v1::HorizontalPodAutoscaler
    ),
    res!(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        &[],
        &["status"],
        true,
        batch::v1::Job
    ),
    res!(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
        &["status"],
        true,
        batch::v1::CronJob
    ),
    res!(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        &["pv"],
        &["status"],
        false,
        core::v1::PersistentVolume
    ),
    res!(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        &["status"],
        false,
        core::v1::PersistentVolumeClaim
    ),
    res!(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        &["sc"],
        &[],
        false,
        storage::v1::StorageClass
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        &["ing"],
        &["status"],
        false,
        networking::v1::Ingress
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "ingressclass",
        "IngressClass",
        false,
        &[],
        &[],
        false,
        networking::v1::IngressClass
    ),
    res!(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &["status"],
        false,
        apiextensions::CustomResourceDefinition
    ),
    res!(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        true,
        &["quota"],
        &["status"],
        false,
        core::v1::ResourceQuota
    ),
    res!(
        "",
        "v1",
        "limitranges",
        "limitrange",
        "LimitRange",
        true,
        &["limits"],
        &[],
        false,
        core::v1::LimitRange
    ),
    res!(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        false,
        &["pc"],
        &[],
        false,
        scheduling::v1::PriorityClass
    ),
    res!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &["status"],
        false,
        policy::v1::PodDisruptionBudget
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        &["netpol"],
        &[],
        false,
        networking::v1::NetworkPolicy
    ),
    res!(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        &[],
        false,
        coordination::v1::Lease
    ),
    res!(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        false,
        &[],
        &[],
        false,
        authentication::v1::TokenReview
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        &[],
        &[],
        false,
        authorization::v1::SelfSubjectAccessReview
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
        &[],
        &[],
        false,
        authorization::v1::SubjectAccessReview
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
        &[],
        &[],
        false,
        authorization::v1::LocalSubjectAccessReview
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
        &[],
        &[],
        false,
        authorization::v1::SelfSubjectRulesReview
    ),
    res!(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "certificatesigningrequest",
        "CertificateSigningRequest",
        false,
        &["csr"],
        &["status", "approval"],
        false,
        certificates::v1::CertificateSigningRequest
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        &[],
        &[],
        false,
        rbac::v1::Role
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
        &[],
        false,
        rbac::v1::RoleBinding
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
        &[],
        false,
        rbac::v1::ClusterRole
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
        false,
        rbac::v1::ClusterRoleBinding
    ),
    metrics("nodes", "", "NodeMetrics", false),
    metrics("pods", "", "PodMetrics", true),
];

/// The resources of CustomResourceDefinitions, one per served version, storage version first
/// (so it is the group's preferred one, and the others are served converted). Replaced whole
/// when a definition changes; entries are leaked, interned by `custom::intern`, so a
/// `&'static Resource` handed out stays valid while the table moves on.
static CUSTOM: RwLock<Vec<&'static Resource>> = RwLock::new(Vec::new());

/// Replaces the custom resources (see `custom::Definition::resources`).
pub fn set_custom(list: Vec<&'static Resource>) {
    if let Ok(mut c) = CUSTOM.write() {
        *c = list;
    }
}

fn custom() -> Vec<&'static Resource> {
    CUSTOM.read().map(|c| c.clone()).unwrap_or_default()
}

/// Every served resource: the built-in table, then the custom ones.
pub fn all() -> Vec<&'static Resource> {
    RESOURCES.iter().chain(custom()).collect()
}

/// Finds a resource by group, version and plural as they appear in a URL.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    let found = |r: &&Resource| r.group == group && r.version == version && r.plural == plural;
    RESOURCES
        .iter()
        .find(found)
        .or_else(|| custom().into_iter().find(found))
}

pub fn by_kind(kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind)
        .or_else(|| custom().into_iter().find(|r| r.kind == kind))
}

/// False for cluster-scoped kinds (Namespace, Node, IngressClass); kinds not served count as
/// namespaced.
pub fn is_namespaced(kind: &str) -> bool {
    by_kind(kind).is_none_or(|r| r.namespaced)
}

/// The groups served, each with its one version, in discovery order.
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in all() {
        if !r.group.is_empty() && !out.contains(&r.group) {
            out.push(r.group);
        }
    }
    out
}

/// A group's versions in table order; the first is the preferred one.
pub fn versions(group: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in all().into_iter().filter(|r| r.group == group) {
        if !out.contains(&r.version) {
            out.push(r.version);
        }
    }
    out
}

/// Whether this is an older version of a kind also served at its group's preferred version,
/// stored in that version's form.
pub fn is_converted(r: &Resource) -> bool {
    // Asked on every request: the built-in table answers without touching the custom one.
    let preferred = RESOURCES
        .iter()
        .find(|x| x.group == r.group)
        .or_else(|| custom().into_iter().find(|x| x.group == r.group))
        .map(|x| x.version);
    preferred != Some(r.version)
}

pub fn in_group(group: &str, version: &str) -> Vec<&'static Resource> {
    all()
        .into_iter()
        .filter(move |r| r.group == group && r.version == version)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_groups_and_namespaces() {
        let pods = lookup("", "v1", "pods").unwrap();
        assert_eq!(pods.key("default", "web"), "/core/pods/default/web");
        let nodes = lookup("", "v1", "nodes").unwrap();
        assert_eq!(nodes.key("", "n1"), "/core/nodes//n1");
        assert_eq!(by_kind("Deployment").unwrap().api_version(), "apps/v1");
    }

    #[test]
    fn scope() {
        assert!(!is_namespaced("Namespace") && !is_namespaced("Node"));
        assert!(!is_namespaced("IngressClass"));
        assert!(is_namespaced("Pod") && is_namespaced("Widget"));
    }

    #[test]
    fn each_kind_decodes_as_its_own_type() {
        for r in RESOURCES
            .iter()
            .filter(|r| !r.is_review() && !r.is_metrics())
        {
            let mut obj = serde_json::json!({"apiVersion": r.api_version(), "kind": r.kind,
                "metadata": {"name": "x"}});
            assert_eq!((r.decode)(&obj), Ok(()), "{}", r.kind);
            // A field only some kinds have, with a type no kind accepts there.
            obj["metadata"]["labels"] = serde_json::json!([1]);
            assert!((r.decode)(&obj).is_err(), "{}", r.kind);
        }
        let pods = lookup("", "v1", "pods").unwrap();
        let bad_spec = serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": 1}});
        assert!((pods.decode)(&bad_spec).is_err());
        let nodes = lookup("", "v1", "nodes").unwrap();
        assert_eq!(
            (nodes.decode)(&bad_spec),
            Ok(()),
            "a Node's spec has no containers"
        );
    }

    /// A kind served in an older version too is served, and stored, at the preferred one.
    #[test]
    fn older_versions_only_beside_the_preferred_one() {
        for r in RESOURCES.iter().filter(|r| is_converted(r)) {
            let preferred = versions(r.group)[0];
            assert!(lookup(r.group, preferred, r.plural).is_some(), "{r:?}");
        }
        assert_eq!(versions("autoscaling"), ["v2", "v1"]);
        assert_eq!(by_kind("HorizontalPodAutoscaler").unwrap().version, "v2");
    }
}
