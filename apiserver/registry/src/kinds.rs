//! The kinds this registry knows, with their scope.

/// Every kind served, as written in `kind:`.
pub const KINDS: &[&str] = &[
    "Namespace",
    "Node",
    "Pod",
    "Service",
    "Endpoints",
    "ConfigMap",
    "Secret",
    "Event",
    "ServiceAccount",
    "EndpointSlice",
    "Deployment",
    "ReplicaSet",
    "Ingress",
    "IngressClass",
    "Lease",
];

/// False for cluster-scoped kinds (Namespace, Node, IngressClass).
pub fn is_namespaced(kind: &str) -> bool {
    !matches!(kind, "Namespace" | "Node" | "IngressClass")
}
