//! The kinds served, with their scope: the one table that routing, discovery, storage and the
//! per-kind rules read.

use crate::schema::{decode, Decode};
use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, certificates, coordination, core,
    discovery, events, networking, policy, rbac, scheduling, storage,
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
    /// Whether objects of this kind carry metadata.generation (1 at create, +1 on each change of
    /// the spec), as upstream's strategies set it: the kinds with a spec that controllers report
    /// an observedGeneration of, and every custom resource. Others (ConfigMaps, Secrets,
    /// Services, Nodes, ...) never have one.
    pub fn tracks_generation(&self) -> bool {
        const KINDS: &[(&str, &str)] = &[
            ("", "Pod"),
            ("", "ReplicationController"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("autoscaling", "HorizontalPodAutoscaler"),
            ("policy", "PodDisruptionBudget"),
            ("networking.k8s.io", "NetworkPolicy"),
            ("networking.k8s.io", "Ingress"),
            ("networking.k8s.io", "IngressClass"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
            (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
            ),
        ];
        KINDS.contains(&(self.group, self.kind)) || !RESOURCES.iter().any(|r| r == self)
    }

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

/// A kind's scope as k8s-openapi's types carry it.
trait Scope {
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The resource of k8s-openapi's type `T`: group, version, plural, kind and scope as the type
/// declares them; what discovery adds (the singular, short names, subresources, the "all"
/// category) given.
const fn kind<T>(
    singular: &'static str,
    short_names: &'static [&'static str],
    subresources: &'static [&'static str],
    in_all: bool,
) -> Resource
where
    T: k8s_openapi::Resource + serde::de::DeserializeOwned,
    T::Scope: Scope,
{
    Resource {
        group: T::GROUP,
        version: T::VERSION,
        plural: T::URL_PATH_SEGMENT,
        singular,
        kind: T::KIND,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        short_names,
        subresources,
        in_all,
        decode: decode::<T>,
    }
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
    kind::<core::v1::Namespace>("namespace", &["ns"], &["status"], false),
    kind::<core::v1::Node>("node", &["no"], &["status"], false),
    kind::<core::v1::Pod>(
        "pod",
        &["po"],
        &[
            "status",
            "binding",
            "log",
            "eviction",
            "exec",
            "attach",
            "portforward",
            "ephemeralcontainers",
        ],
        true,
    ),
    kind::<core::v1::Service>("service", &["svc"], &["status"], true),
    kind::<core::v1::Endpoints>("endpoints", &["ep"], &[], false),
    kind::<core::v1::ConfigMap>("configmap", &["cm"], &[], false),
    kind::<core::v1::Secret>("secret", &[], &[], false),
    kind::<core::v1::Event>("event", &["ev"], &[], false),
    // The same objects under events.k8s.io's field names (`events_v1`), stored as core/v1.
    kind::<events::v1::Event>("event", &["ev"], &[], false),
    kind::<core::v1::ServiceAccount>("serviceaccount", &["sa"], &["token"], false),
    kind::<discovery::v1::EndpointSlice>("endpointslice", &[], &[], false),
    kind::<apps::v1::Deployment>("deployment", &["deploy"], &["status", "scale"], true),
    kind::<apps::v1::ReplicaSet>("replicaset", &["rs"], &["status", "scale"], true),
    kind::<apps::v1::DaemonSet>("daemonset", &["ds"], &["status"], true),
    kind::<apps::v1::StatefulSet>("statefulset", &["sts"], &["status", "scale"], true),
    kind::<apps::v1::ControllerRevision>("controllerrevision", &[], &[], false),
    kind::<autoscaling::v2::HorizontalPodAutoscaler>(
        "horizontalpodautoscaler",
        &["hpa"],
        &["status"],
        true,
    ),
    // Older clients' form (`kubectl autoscale` writes v1), converted to the stored v2 form:
    // see `autoscaling_v1`. After v2, so v2 is the group's preferred version.
    kind::<autoscaling::v1::HorizontalPodAutoscaler>(
        "horizontalpodautoscaler",
        &["hpa"],
        &["status"],
        true,
    ),
    kind::<batch::v1::Job>("job", &[], &["status"], true),
    kind::<batch::v1::CronJob>("cronjob", &["cj"], &["status"], true),
    kind::<core::v1::PersistentVolume>("persistentvolume", &["pv"], &["status"], false),
    kind::<core::v1::PersistentVolumeClaim>("persistentvolumeclaim", &["pvc"], &["status"], false),
    kind::<storage::v1::StorageClass>("storageclass", &["sc"], &[], false),
    // What CSI drivers' install manifests create and read. Keelson runs no CSI driver: served
    // so those manifests apply and their RBAC rules name real resources.
    kind::<storage::v1::CSIDriver>("csidriver", &[], &[], false),
    kind::<storage::v1::CSINode>("csinode", &[], &[], false),
    kind::<storage::v1::VolumeAttachment>("volumeattachment", &[], &["status"], false),
    kind::<storage::v1::CSIStorageCapacity>("csistoragecapacity", &[], &[], false),
    kind::<networking::v1::Ingress>("ingress", &["ing"], &["status"], false),
    kind::<networking::v1::IngressClass>("ingressclass", &[], &[], false),
    kind::<apiextensions::CustomResourceDefinition>(
        "customresourcedefinition",
        &["crd", "crds"],
        &["status"],
        false,
    ),
    kind::<core::v1::ResourceQuota>("resourcequota", &["quota"], &["status"], false),
    kind::<core::v1::LimitRange>("limitrange", &["limits"], &[], false),
    kind::<scheduling::v1::PriorityClass>("priorityclass", &["pc"], &[], false),
    kind::<policy::v1::PodDisruptionBudget>("poddisruptionbudget", &["pdb"], &["status"], false),
    kind::<networking::v1::NetworkPolicy>("networkpolicy", &["netpol"], &[], false),
    kind::<coordination::v1::Lease>("lease", &[], &[], false),
    kind::<authentication::v1::TokenReview>("tokenreview", &[], &[], false),
    kind::<authorization::v1::SelfSubjectAccessReview>("selfsubjectaccessreview", &[], &[], false),
    kind::<authorization::v1::SubjectAccessReview>("subjectaccessreview", &[], &[], false),
    kind::<authorization::v1::LocalSubjectAccessReview>(
        "localsubjectaccessreview",
        &[],
        &[],
        false,
    ),
    kind::<authorization::v1::SelfSubjectRulesReview>("selfsubjectrulesreview", &[], &[], false),
    kind::<certificates::v1::CertificateSigningRequest>(
        "certificatesigningrequest",
        &["csr"],
        &["status", "approval"],
        false,
    ),
    kind::<rbac::v1::Role>("role", &[], &[], false),
    kind::<rbac::v1::RoleBinding>("rolebinding", &[], &[], false),
    kind::<rbac::v1::ClusterRole>("clusterrole", &[], &[], false),
    kind::<rbac::v1::ClusterRoleBinding>("clusterrolebinding", &[], &[], false),
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
/// stored in that version's form, or an events.k8s.io Event (stored as a core/v1 one).
pub fn is_converted(r: &Resource) -> bool {
    if r.group == EVENTS_GROUP {
        return true;
    }
    // Asked on every request: the built-in table answers without touching the custom one.
    let preferred = RESOURCES
        .iter()
        .find(|x| x.group == r.group)
        .or_else(|| custom().into_iter().find(|x| x.group == r.group))
        .map(|x| x.version);
    preferred != Some(r.version)
}

/// The group whose Events are stored as core/v1 Events (`events_v1`), as upstream stores them.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// Where objects of a converted resource are stored: core/v1 Events for events.k8s.io's, else
/// the group's preferred version of the same resource.
pub fn storage_of(r: &Resource) -> Option<&'static Resource> {
    if r.group == EVENTS_GROUP {
        return lookup("", "v1", "events");
    }
    versions(r.group)
        .first()
        .and_then(|v| lookup(r.group, v, r.plural))
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
            assert!(storage_of(r).is_some_and(|s| s != r), "{r:?}");
        }
        assert_eq!(
            storage_of(lookup(EVENTS_GROUP, "v1", "events").unwrap()).map(Resource::api_version),
            Some("v1".to_string())
        );
        assert_eq!(versions("autoscaling"), ["v2", "v1"]);
        assert_eq!(by_kind("HorizontalPodAutoscaler").unwrap().version, "v2");
    }
}
