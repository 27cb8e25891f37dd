//! The k8s-openapi type of every built-in kind, for its schema. The registry's `Resource` keeps
//! only a decoder, so the types are named again here; a test checks that the two tables agree.

use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, certificates, coordination, core,
    discovery, events, networking, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// Adds a kind's schema (and every schema it refers to) to the generator; returns the name of
/// its component, e.g. "io.k8s.api.core.v1.Pod".
pub type AddSchema = fn(&mut SchemaGenerator) -> String;

fn add<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    let _: Schema = g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// (group, version, kind) -> the kind's schema.
pub static KINDS: &[(&str, &str, &str, AddSchema)] = &[
    ("", "v1", "Namespace", add::<core::v1::Namespace>),
    ("", "v1", "Node", add::<core::v1::Node>),
    ("", "v1", "Pod", add::<core::v1::Pod>),
    ("", "v1", "Service", add::<core::v1::Service>),
    ("", "v1", "Endpoints", add::<core::v1::Endpoints>),
    ("", "v1", "ConfigMap", add::<core::v1::ConfigMap>),
    ("", "v1", "Secret", add::<core::v1::Secret>),
    ("", "v1", "Event", add::<core::v1::Event>),
    ("events.k8s.io", "v1", "Event", add::<events::v1::Event>),
    ("", "v1", "ServiceAccount", add::<core::v1::ServiceAccount>),
    (
        "",
        "v1",
        "PersistentVolume",
        add::<core::v1::PersistentVolume>,
    ),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        add::<core::v1::PersistentVolumeClaim>,
    ),
    ("", "v1", "ResourceQuota", add::<core::v1::ResourceQuota>),
    ("", "v1", "LimitRange", add::<core::v1::LimitRange>),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        add::<discovery::v1::EndpointSlice>,
    ),
    ("apps", "v1", "Deployment", add::<apps::v1::Deployment>),
    ("apps", "v1", "ReplicaSet", add::<apps::v1::ReplicaSet>),
    ("apps", "v1", "DaemonSet", add::<apps::v1::DaemonSet>),
    ("apps", "v1", "StatefulSet", add::<apps::v1::StatefulSet>),
    (
        "apps",
        "v1",
        "ControllerRevision",
        add::<apps::v1::ControllerRevision>,
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        add::<autoscaling::v2::HorizontalPodAutoscaler>,
    ),
    (
        "autoscaling",
        "v1",
        "HorizontalPodAutoscaler",
        add::<autoscaling::v1::HorizontalPodAutoscaler>,
    ),
    ("batch", "v1", "Job", add::<batch::v1::Job>),
    ("batch", "v1", "CronJob", add::<batch::v1::CronJob>),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        add::<storage::v1::StorageClass>,
    ),
    (
        "storage.k8s.io",
        "v1",
        "CSIDriver",
        add::<storage::v1::CSIDriver>,
    ),
    (
        "storage.k8s.io",
        "v1",
        "CSINode",
        add::<storage::v1::CSINode>,
    ),
    (
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        add::<storage::v1::VolumeAttachment>,
    ),
    (
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        add::<storage::v1::CSIStorageCapacity>,
    ),
    (
        "networking.k8s.io",
        "v1",
        "Ingress",
        add::<networking::v1::Ingress>,
    ),
    (
        "networking.k8s.io",
        "v1",
        "IngressClass",
        add::<networking::v1::IngressClass>,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        add::<networking::v1::NetworkPolicy>,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        add::<apiextensions::CustomResourceDefinition>,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        add::<scheduling::v1::PriorityClass>,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        add::<policy::v1::PodDisruptionBudget>,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        add::<coordination::v1::Lease>,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        add::<authentication::v1::TokenReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        add::<authorization::v1::SelfSubjectAccessReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        add::<authorization::v1::SubjectAccessReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        add::<authorization::v1::LocalSubjectAccessReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        add::<authorization::v1::SelfSubjectRulesReview>,
    ),
    (
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        add::<certificates::v1::CertificateSigningRequest>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        add::<rbac::v1::Role>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        add::<rbac::v1::RoleBinding>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        add::<rbac::v1::ClusterRole>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        add::<rbac::v1::ClusterRoleBinding>,
    ),
];

/// The schema adder of a built-in kind; None for kinds without a k8s-openapi type (metrics).
pub fn lookup(group: &str, version: &str, kind: &str) -> Option<AddSchema> {
    KINDS
        .iter()
        .find(|(g, v, k, _)| (*g, *v, *k) == (group, version, kind))
        .map(|(_, _, _, add)| *add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_kind_but_metrics_has_a_schema() {
        for r in crate::resources::RESOURCES
            .iter()
            .filter(|r| !r.is_metrics())
        {
            assert!(
                lookup(r.group, r.version, r.kind).is_some(),
                "{}/{} {} has no schema in openapi::kinds",
                r.group,
                r.version,
                r.kind
            );
        }
    }
}
