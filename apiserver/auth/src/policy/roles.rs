//! The default ClusterRoles of users and nodes, as upstream's bootstrap policy writes them
//! (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), limited to the kinds Keelson
//! serves plus the usual ones clients name; aggregation is not served, so admin, edit and view
//! hold their rules themselves.

use crate::rbac::Rule;

pub const READ: &[&str] = &["get", "list", "watch"];
pub const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
pub const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

const CORE: &[&str] = &[""];
const APPS: &[&str] = &["apps"];

fn r(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
    Rule::resources(verbs, groups, resources)
}

pub fn cluster_admin() -> Vec<Rule> {
    vec![r(&["*"], &["*"], &["*"]), Rule::urls(&["*"], &["*"])]
}

/// Read access to a namespace's objects, not to Secrets or roles.
pub fn view() -> Vec<Rule> {
    let mut rules = vec![
        r(
            READ,
            CORE,
            &[
                "pods",
                "pods/status",
                "pods/log",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "replicationcontrollers/status",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
                "limitranges",
                "resourcequotas",
                "resourcequotas/status",
                "bindings",
                "events",
                "namespaces",
                "namespaces/status",
            ],
        ),
        r(READ, &["discovery.k8s.io"], &["endpointslices"]),
        r(
            READ,
            APPS,
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        r(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        r(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        r(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        r(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
        r(READ, &["coordination.k8s.io"], &["leases"]),
    ];
    rules.extend(aggregated_metrics_reader());
    rules
}

/// `kubectl top`: upstream's system:aggregated-metrics-reader, which aggregates into view (and
/// so edit and admin); here its rules are part of view.
pub fn aggregated_metrics_reader() -> Vec<Rule> {
    vec![r(
        READ,
        &[keelson_apiserver_registry::resources::METRICS_GROUP],
        &["pods", "nodes"],
    )]
}

/// `view` plus writing a namespace's workloads, Secrets and configuration; not roles.
pub fn edit() -> Vec<Rule> {
    let mut rules = view();
    rules.extend([
        r(&["impersonate"], CORE, &["serviceaccounts"]),
        // Not pods/ephemeralcontainers, as upstream: an ephemeral container skips admission
        // policies written before it existed, so granting it is left to the cluster's admins.
        r(
            READ_WRITE,
            CORE,
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        r(
            &["create"],
            CORE,
            &["pods/eviction", "serviceaccounts/token"],
        ),
        r(
            READ_WRITE,
            CORE,
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        r(WRITE, CORE, &["endpoints"]),
        r(WRITE, &["discovery.k8s.io"], &["endpointslices"]),
        r(
            READ_WRITE,
            APPS,
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        r(READ_WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        r(READ_WRITE, &["batch"], &["cronjobs", "jobs"]),
        r(READ_WRITE, &["policy"], &["poddisruptionbudgets"]),
        r(
            READ_WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        r(READ_WRITE, &["coordination.k8s.io"], &["leases"]),
    ]);
    rules
}

/// `edit` plus a namespace's roles and bindings.
pub fn admin() -> Vec<Rule> {
    let mut rules = edit();
    rules.extend([
        r(
            READ_WRITE,
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
        ),
        r(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
    ]);
    rules
}

/// The health checks and the version, which both discovery and public_info_viewer grant.
const HEALTH_AND_VERSION: [&str; 5] = ["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// What every authenticated user may read to find the API (bound to system:authenticated).
pub fn discovery() -> Vec<Rule> {
    let api = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    vec![Rule::urls(
        &["get"],
        &[&HEALTH_AND_VERSION[..], &api].concat(),
    )]
}

/// Asking who one is and what one may do.
pub fn basic_user() -> Vec<Rule> {
    vec![
        r(
            &["create"],
            &["authentication.k8s.io"],
            &["selfsubjectreviews"],
        ),
        r(
            &["create"],
            &["authorization.k8s.io"],
            &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        ),
    ]
}

/// Health and version, for anyone (bound to system:authenticated and system:unauthenticated).
pub fn public_info_viewer() -> Vec<Rule> {
    let checks = ["/healthz/*", "/livez/*", "/readyz/*"];
    vec![Rule::urls(
        &["get"],
        &[&HEALTH_AND_VERSION[..], &checks].concat(),
    )]
}

pub fn monitoring() -> Vec<Rule> {
    vec![Rule::urls(
        &["get"],
        &[
            "/metrics",
            "/metrics/slis",
            "/livez",
            "/readyz",
            "/healthz",
            "/livez/*",
            "/readyz/*",
            "/healthz/*",
        ],
    )]
}

/// What a node (the agent, and on joined machines the proxy) does through the API; the Node
/// authorizer checks the graph-limited kinds (Secrets, ConfigMaps, service-account tokens,
/// Leases) itself, and NodeRestriction admission limits writes to its own objects.
pub fn node() -> Vec<Rule> {
    vec![
        r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        r(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        r(READ, CORE, &["services"]),
        r(&["create", "get", "list", "watch"], CORE, &["nodes"]),
        // Keelson's agent reads its Node's status subresource before writing it.
        r(&["get", "update", "patch"], CORE, &["nodes/status"]),
        r(&["update", "patch"], CORE, &["nodes"]),
        r(&["create", "update", "patch"], CORE, &["events"]),
        r(
            &["create", "update", "patch"],
            &["events.k8s.io"],
            &["events"],
        ),
        r(READ, CORE, &["pods"]),
        r(&["create", "delete"], CORE, &["pods"]),
        // Reading a status subresource shows no more than the pods a node reads anyway.
        r(&["get", "update", "patch"], CORE, &["pods/status"]),
        r(&["create"], CORE, &["pods/eviction"]),
        r(&["get"], CORE, &["secrets", "configmaps"]),
        r(
            &["get"],
            CORE,
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        r(&["get"], CORE, &["endpoints"]),
        r(
            &["create", "get", "list", "watch"],
            &["certificates.k8s.io"],
            &["certificatesigningrequests"],
        ),
        r(
            &["get", "create", "update", "patch", "delete"],
            &["coordination.k8s.io"],
            &["leases"],
        ),
        r(&["create"], CORE, &["serviceaccounts/token"]),
        r(READ, &["node.k8s.io"], &["runtimeclasses"]),
    ]
}

/// A joining machine's bootstrap token: ask for its client certificate and wait for it.
pub fn node_bootstrapper() -> Vec<Rule> {
    vec![r(
        &["create", "get", "list", "watch"],
        &["certificates.k8s.io"],
        &["certificatesigningrequests"],
    )]
}

pub fn csr_node_client() -> Vec<Rule> {
    vec![r(
        &["create"],
        &["certificates.k8s.io"],
        &["certificatesigningrequests/nodeclient"],
    )]
}

pub fn csr_self_node_client() -> Vec<Rule> {
    vec![r(
        &["create"],
        &["certificates.k8s.io"],
        &["certificatesigningrequests/selfnodeclient"],
    )]
}

/// What kube-proxy reads, and the events it writes.
pub fn node_proxier() -> Vec<Rule> {
    vec![
        r(&["list", "watch"], CORE, &["services", "endpoints"]),
        r(READ, CORE, &["nodes"]),
        r(&["create", "update", "patch"], CORE, &["events"]),
        r(
            &["create", "update", "patch"],
            &["events.k8s.io"],
            &["events"],
        ),
        r(
            &["list", "watch"],
            &["discovery.k8s.io"],
            &["endpointslices"],
        ),
    ]
}

/// Keelson's NetworkPolicy enforcer on each node: it matches policies' pod and namespace
/// selectors against every pod and namespace of the cluster (peers may be anywhere), so it
/// reads them all, and reports what it could not apply as events.
pub fn network_policy() -> Vec<Rule> {
    vec![
        r(READ, CORE, &["pods", "namespaces"]),
        r(READ, &["networking.k8s.io"], &["networkpolicies"]),
        r(&["create", "update", "patch"], CORE, &["events"]),
        r(
            &["create", "update", "patch"],
            &["events.k8s.io"],
            &["events"],
        ),
    ]
}

/// What cluster DNS reads (upstream's system:coredns from the CoreDNS addon): keelson-dns
/// watches Services and EndpointSlices; the rest keeps CoreDNS itself working on Keelson.
pub fn coredns() -> Vec<Rule> {
    vec![
        r(
            &["list", "watch"],
            CORE,
            &["endpoints", "services", "pods", "namespaces"],
        ),
        r(
            &["list", "watch"],
            &["discovery.k8s.io"],
            &["endpointslices"],
        ),
    ]
}

/// The API server's own calls to the agents (logs, exec, stats).
pub fn kubelet_api_admin() -> Vec<Rule> {
    vec![
        r(&["get", "list", "watch", "proxy"], CORE, &["nodes"]),
        r(
            &["*"],
            CORE,
            &["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"],
        ),
    ]
}

pub fn scheduler() -> Vec<Rule> {
    vec![
        r(&["create", "patch", "update"], CORE, &["events"]),
        r(
            &["create", "patch", "update"],
            &["events.k8s.io"],
            &["events"],
        ),
        r(&["create"], &["coordination.k8s.io"], &["leases"]),
        r(&["get", "update"], &["coordination.k8s.io"], &["leases"]).named(&["kube-scheduler"]),
        r(
            READ,
            CORE,
            &[
                "nodes",
                "namespaces",
                "services",
                "replicationcontrollers",
                "persistentvolumeclaims",
                "persistentvolumes",
                "configmaps",
            ],
        ),
        // Upstream's system:volume-scheduler: the selected-node annotation on claims.
        r(&["patch", "update"], CORE, &["persistentvolumeclaims"]),
        r(READ, &["storage.k8s.io"], &["storageclasses"]),
        r(&["delete", "get", "list", "watch"], CORE, &["pods"]),
        r(&["create"], CORE, &["bindings", "pods/binding"]),
        r(&["patch", "update"], CORE, &["pods/status"]),
        r(READ, APPS, &["replicasets", "statefulsets"]),
        r(READ, &["policy"], &["poddisruptionbudgets"]),
        r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        r(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
    ]
}

/// Keelson's ingress controller: reads what it routes to, writes Ingress status and events.
pub fn ingress_controller() -> Vec<Rule> {
    vec![
        r(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingressclasses"],
        ),
        r(
            &["update", "patch"],
            &["networking.k8s.io"],
            &["ingresses/status"],
        ),
        r(
            READ,
            CORE,
            &["services", "endpoints", "secrets", "configmaps", "nodes"],
        ),
        r(READ, &["discovery.k8s.io"], &["endpointslices"]),
        r(&["create", "patch", "update"], CORE, &["events"]),
        r(
            &["create", "patch", "update"],
            &["events.k8s.io"],
            &["events"],
        ),
        r(
            &["get", "create", "update"],
            &["coordination.k8s.io"],
            &["leases"],
        ),
    ]
}
