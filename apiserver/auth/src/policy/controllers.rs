//! The controller manager's roles: system:kube-controller-manager (reading everything, as the
//! garbage collector and the informers need) and one system:controller:<name> role per
//! controller Keelson runs, holding what that controller writes (read from controllers/: the
//! Keelson controllers patch where upstream's update, so both verbs are granted).

use super::roles::{READ, READ_WRITE};
use crate::rbac::Rule;

const CORE: &[&str] = &[""];
const APPS: &[&str] = &["apps"];
const BATCH: &[&str] = &["batch"];
const AUTOSCALING: &[&str] = &["autoscaling"];
const METRICS: &str = keelson_apiserver_registry::resources::METRICS_GROUP;

fn r(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
    Rule::resources(verbs, groups, resources)
}

fn events() -> [Rule; 2] {
    [
        r(&["create", "patch", "update"], CORE, &["events"]),
        r(
            &["create", "patch", "update"],
            &["events.k8s.io"],
            &["events"],
        ),
    ]
}

pub fn kube_controller_manager() -> Vec<Rule> {
    let mut rules = vec![
        r(&["create"], &["coordination.k8s.io"], &["leases"]),
        r(&["get", "update"], &["coordination.k8s.io"], &["leases"])
            .named(&["kube-controller-manager"]),
        r(&["create"], CORE, &["secrets", "serviceaccounts"]),
        r(&["delete"], CORE, &["secrets"]),
        r(
            &["get"],
            CORE,
            &["namespaces", "secrets", "serviceaccounts"],
        ),
        r(&["update"], CORE, &["secrets", "serviceaccounts"]),
        r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        r(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        r(&["list", "watch"], &["*"], &["*"]),
        r(&["create"], CORE, &["serviceaccounts/token"]),
    ];
    rules.extend(events());
    rules
}

/// (controller role name without the system:controller: prefix, its rules).
pub fn controller_roles() -> Vec<(&'static str, Vec<Rule>)> {
    let with_events = |mut rules: Vec<Rule>| {
        rules.extend(events());
        rules
    };
    let finalizers_status =
        |res: &str| -> Vec<String> { vec![format!("{res}/status"), format!("{res}/finalizers")] };
    let ds = finalizers_status("daemonsets");
    let deploy = finalizers_status("deployments");
    let rs = finalizers_status("replicasets");
    fn as_str(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    vec![
        (
            "daemon-set-controller",
            with_events(vec![
                r(READ, APPS, &["daemonsets"]),
                r(&["update", "patch"], APPS, &as_str(&ds)),
                r(&["list", "watch"], CORE, &["nodes"]),
                r(
                    &["list", "watch", "create", "delete", "patch"],
                    CORE,
                    &["pods"],
                ),
                r(&["create"], CORE, &["pods/binding"]),
                r(READ_WRITE, APPS, &["controllerrevisions"]),
            ]),
        ),
        (
            // Upstream's rules, with patch where it updates: Keelson patches status.
            "statefulset-controller",
            with_events(vec![
                r(&["list", "watch"], APPS, &["statefulsets"]),
                r(
                    &["update", "patch"],
                    APPS,
                    &["statefulsets/status", "statefulsets/finalizers"],
                ),
                r(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    CORE,
                    &["pods"],
                ),
                r(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    APPS,
                    &["controllerrevisions"],
                ),
                r(
                    &["get", "list", "create", "update", "delete"],
                    CORE,
                    &["persistentvolumeclaims"],
                ),
            ]),
        ),
        (
            "deployment-controller",
            with_events(vec![
                r(
                    &["get", "list", "watch", "update", "patch"],
                    APPS,
                    &["deployments"],
                ),
                r(&["update", "patch"], APPS, &as_str(&deploy)),
                r(
                    &[
                        "create", "delete", "get", "list", "patch", "update", "watch",
                    ],
                    APPS,
                    &["replicasets"],
                ),
                r(&["get", "list", "watch", "update"], CORE, &["pods"]),
            ]),
        ),
        (
            "replicaset-controller",
            with_events(vec![
                r(
                    &["get", "list", "watch", "update", "patch"],
                    APPS,
                    &["replicasets"],
                ),
                r(&["update", "patch"], APPS, &as_str(&rs)),
                r(
                    &["create", "delete", "list", "patch", "watch"],
                    CORE,
                    &["pods"],
                ),
            ]),
        ),
        (
            "endpointslice-controller",
            with_events(vec![
                r(READ, CORE, &["services", "pods", "nodes"]),
                r(&["update"], CORE, &["services/finalizers"]),
                r(
                    &["create", "delete", "get", "list", "update", "patch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ]),
        ),
        (
            "node-controller",
            with_events(vec![
                r(
                    &["get", "list", "update", "delete", "patch"],
                    CORE,
                    &["nodes"],
                ),
                r(&["patch", "update"], CORE, &["nodes/status"]),
                r(&["list", "delete"], CORE, &["pods"]),
                r(&["patch", "update"], CORE, &["pods/status"]),
                r(&["create"], CORE, &["pods/eviction"]),
                r(READ, &["coordination.k8s.io"], &["leases"]),
            ]),
        ),
        (
            "node-ipam-controller",
            with_events(vec![r(
                &["get", "list", "watch", "update", "patch"],
                CORE,
                &["nodes"],
            )]),
        ),
        (
            // Load-balancer IP allocation (--load-balancer-ip-range), in upstream's service
            // controller's role: it writes only status.loadBalancer.
            "service-controller",
            with_events(vec![
                r(READ, CORE, &["services"]),
                r(&["patch", "update"], CORE, &["services/status"]),
            ]),
        ),
        (
            "certificate-controller",
            with_events(vec![
                r(
                    READ,
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
                r(
                    &["update", "patch"],
                    &["certificates.k8s.io"],
                    &[
                        "certificatesigningrequests/approval",
                        "certificatesigningrequests/status",
                    ],
                ),
                r(&["approve", "sign"], &["certificates.k8s.io"], &["signers"]).named(&[
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kubelet-serving",
                ]),
                r(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ]),
        ),
        (
            "job-controller",
            with_events(vec![
                r(
                    &["get", "list", "watch", "update", "patch"],
                    BATCH,
                    &["jobs"],
                ),
                r(
                    &["update", "patch"],
                    BATCH,
                    &["jobs/status", "jobs/finalizers"],
                ),
                r(
                    &["list", "watch", "create", "delete", "update", "patch"],
                    CORE,
                    &["pods"],
                ),
            ]),
        ),
        (
            "cronjob-controller",
            with_events(vec![
                r(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    BATCH,
                    &["jobs"],
                ),
                r(
                    &["get", "list", "watch", "update", "patch"],
                    BATCH,
                    &["cronjobs"],
                ),
                r(
                    &["update", "patch"],
                    BATCH,
                    &["cronjobs/status", "cronjobs/finalizers"],
                ),
                r(&["list", "delete"], CORE, &["pods"]),
            ]),
        ),
        (
            "ttl-after-finished-controller",
            with_events(vec![r(
                &["get", "list", "watch", "delete"],
                BATCH,
                &["jobs"],
            )]),
        ),
        (
            "generic-garbage-collector",
            vec![r(
                &["get", "list", "watch", "patch", "update", "delete"],
                &["*"],
                &["*"],
            )],
        ),
        (
            "namespace-controller",
            vec![
                r(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
                r(
                    &["update"],
                    CORE,
                    &["namespaces/finalize", "namespaces/status"],
                ),
            ],
        ),
        (
            "persistent-volume-binder",
            with_events(vec![
                r(
                    &[
                        "create", "delete", "get", "list", "update", "patch", "watch",
                    ],
                    CORE,
                    &["persistentvolumes"],
                ),
                r(&["update", "patch"], CORE, &["persistentvolumes/status"]),
                r(
                    &["get", "list", "update", "patch", "watch"],
                    CORE,
                    &["persistentvolumeclaims"],
                ),
                r(
                    &["update", "patch"],
                    CORE,
                    &["persistentvolumeclaims/status"],
                ),
                r(READ, CORE, &["pods"]),
                r(&["get", "list"], CORE, &["nodes"]),
                r(READ, &["storage.k8s.io"], &["storageclasses"]),
            ]),
        ),
        (
            "pvc-protection-controller",
            vec![
                r(
                    &["get", "list", "watch", "update", "patch"],
                    CORE,
                    &["persistentvolumeclaims"],
                ),
                r(READ, CORE, &["pods"]),
            ],
        ),
        (
            "pv-protection-controller",
            vec![r(
                &["get", "list", "watch", "update", "patch"],
                CORE,
                &["persistentvolumes"],
            )],
        ),
        (
            "service-account-controller",
            with_events(vec![r(&["get", "create"], CORE, &["serviceaccounts"])]),
        ),
        (
            "horizontal-pod-autoscaler",
            with_events(vec![
                r(READ, AUTOSCALING, &["horizontalpodautoscalers"]),
                r(
                    &["update", "patch"],
                    AUTOSCALING,
                    &["horizontalpodautoscalers/status"],
                ),
                r(&["get", "update", "patch"], &["*"], &["*/scale"]),
                r(&["get", "list"], CORE, &["pods"]),
                // Resource metrics come from the API server's own metrics.k8s.io.
                r(&["get", "list"], &[METRICS], &["pods"]),
            ]),
        ),
        (
            // Counts any kind a quota names (count/<resource>.<group>), as upstream's.
            "resourcequota-controller",
            with_events(vec![
                r(&["list", "watch"], &["*"], &["*"]),
                r(&["get"], CORE, &["resourcequotas"]),
                r(&["update"], CORE, &["resourcequotas/status"]),
            ]),
        ),
        (
            "disruption-controller",
            with_events(vec![
                r(
                    &["get", "list", "watch"],
                    APPS,
                    &["deployments", "replicasets", "statefulsets"],
                ),
                r(&["get", "list", "watch"], CORE, &["pods"]),
                r(READ, &["policy"], &["poddisruptionbudgets"]),
                r(
                    &["update", "patch"],
                    &["policy"],
                    &["poddisruptionbudgets/status"],
                ),
            ]),
        ),
        (
            "root-ca-cert-publisher",
            with_events(vec![r(&["get", "create", "update"], CORE, &["configmaps"])]),
        ),
    ]
}
