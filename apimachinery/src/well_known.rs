//! Well-known label, annotation, taint and type names, as upstream spells them. One place, so a
//! controller that writes a label and a proxy that reads it cannot drift apart.

/// On an EndpointSlice: the Service it belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// On an EndpointSlice: the controller that manages it.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The managed-by value of upstream's (and Keelson's) endpointslice controller.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// On ReplicaSets and Pods: the hash of the Deployment's pod template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// On Deployments and ReplicaSets: the rollout revision.
pub const DEPLOYMENT_REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// On a ReplicaSet reused by a rollback: the revisions it had before (comma-separated).
pub const DEPLOYMENT_REVISION_HISTORY_ANNOTATION: &str =
    "deployment.kubernetes.io/revision-history";
/// On ReplicaSets: the Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// On ReplicaSets: the Deployment's replicas plus maxSurge when the ReplicaSet was last scaled.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The rollback request of extensions/v1beta1, never copied from a Deployment to a ReplicaSet.
pub const DEPRECATED_ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";
/// Written by `kubectl apply`.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// On Pods: lower costs are deleted first when a ReplicaSet scales down.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// On each API server's identity Lease in kube-system (upstream's label, value kube-apiserver).
pub const APISERVER_IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// On an API server's identity Lease: where clients reach it (`address:port`), which the
/// `kubernetes` Service's endpoints list while the lease is fresh.
pub const APISERVER_ADVERTISE_ANNOTATION: &str = "keelson.dev/advertise-address";

/// On Nodes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const OS_LABEL: &str = "kubernetes.io/os";
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The taint a node carries while it is not Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint a node carries while its heartbeats have stopped (Ready is Unknown).
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// Taints for a node's spec.unschedulable and its pressure conditions (tolerated by DaemonSet pods).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
pub const DISK_PRESSURE_TAINT: &str = "node.kubernetes.io/disk-pressure";
pub const MEMORY_PRESSURE_TAINT: &str = "node.kubernetes.io/memory-pressure";
pub const PID_PRESSURE_TAINT: &str = "node.kubernetes.io/pid-pressure";
pub const NETWORK_UNAVAILABLE_TAINT: &str = "node.kubernetes.io/network-unavailable";
/// On Nodes, set by the agent's vxlan backend: its VTEP's MAC address, which peers put into
/// their neighbour and FDB entries (flannel's `flannel.alpha.coreos.com/backend-data`).
pub const VXLAN_VTEP_MAC_ANNOTATION: &str = "keelson.dev/vxlan-vtep-mac";
/// On Nodes: the agent's network backend ("vxlan" when it has a VTEP).
pub const BACKEND_TYPE_ANNOTATION: &str = "keelson.dev/backend-type";

/// On a DaemonSet's Pods: the hash of the template they were made from.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// On a DaemonSet's Pods: the DaemonSet's generation when they were made.
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// On a StatefulSet's Pods: the pod's own name, so a Service can select one replica.
pub const STATEFULSET_POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// On a StatefulSet's Pods: the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// On ControllerRevisions: the hash in the revision's name.
pub const CONTROLLER_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// On Namespaces: the namespace's own name (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Ingress classes.
pub const DEFAULT_INGRESS_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
pub const LEGACY_INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Secret types.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";
pub const SECRET_TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
pub const SECRET_TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";

/// On the BOOKMARK that ends a watch's initial events (`sendInitialEvents=true`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Bootstrap tokens (kubeadm join, kubelet TLS bootstrap): the Secret type, its name prefix in
/// kube-system, and the groups of its users and of nodes.
pub const SECRET_TYPE_BOOTSTRAP_TOKEN: &str = "bootstrap.kubernetes.io/token";
pub const BOOTSTRAP_TOKEN_SECRET_PREFIX: &str = "bootstrap-token-";
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";
pub const NODES_GROUP: &str = "system:nodes";
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// ConfigMap kube-public/cluster-info, readable without credentials, whose `kubeconfig` key
/// tells joining nodes where the API server is and which CA signs it.
pub const CLUSTER_INFO_CONFIGMAP: &str = "cluster-info";

/// On Namespaces: the Pod Security Standard (privileged, baseline, restricted) each mode of
/// PodSecurity admission applies, and the standards' version ("latest" or "v1.N").
pub const POD_SECURITY_ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const POD_SECURITY_ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const POD_SECURITY_AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const POD_SECURITY_AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const POD_SECURITY_WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const POD_SECURITY_WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The ConfigMap holding the cluster CA (key ca.crt) that every namespace gets, for in-cluster
/// clients to verify the API server.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// Where a pod's service-account token, ca.crt and namespace are mounted.
pub const SERVICE_ACCOUNT_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Name prefix of the projected volume ServiceAccount admission adds to pods.
pub const KUBE_API_ACCESS_VOLUME_PREFIX: &str = "kube-api-access-";
/// The service account of pods that name none, made in every namespace.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Group of every service account (and, with ":<namespace>", of a namespace's).
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// Marks a mirror pod (the API's copy of a static pod).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Members may do anything (upstream's privileged group; the admin token's group).
pub const MASTERS_GROUP: &str = "system:masters";
/// The group of requests without credentials (user system:anonymous).
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// On the default RBAC roles and bindings: "true" lets the API server restore them at every
/// start; "false" keeps a user's edits.
pub const RBAC_AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// Label of the default RBAC objects (value rbac-defaults).
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";
/// On a StorageClass: "true" makes it the class of claims that name none.
pub const DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// On a claim: the node the scheduler chose for its first consumer (WaitForFirstConsumer).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// On a claim: the provisioner asked to make its volume (and the beta name, still read).
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
pub const BETA_STORAGE_PROVISIONER_ANNOTATION: &str =
    "volume.beta.kubernetes.io/storage-provisioner";
/// On a claim and its volume: the binder finished binding them ("yes").
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or volume: the binder (not the user) set the other side's name ("yes").
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: the provisioner that made it (its Delete reclaim is that provisioner's).
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Finalizers that keep a claim in use by a pod, and a bound volume, from going away.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// The built-in local-path provisioner (a node-local directory per claim), named as k3s's.
pub const LOCAL_PATH_PROVISIONER: &str = "rancher.io/local-path";
/// On a local-path volume: its directory is still on the node; the node's agent removes the
/// directory (reclaim Delete) and then this finalizer.
pub const LOCAL_PATH_DIRECTORY_FINALIZER: &str = "keelson.dev/local-path-directory";
/// On a Job's pods while the Job controller has not yet counted them in the Job's status: the
/// pod stays until its end is recorded, so a deleted pod is never lost from the counts.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// An Indexed Job's pod's index: an annotation and (since 1.28) a label.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The Job's uid on its pods (the generated selector's key), and the legacy label of the same.
pub const JOB_CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const LEGACY_JOB_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// The Job's name on its pods, and the legacy label of the same.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// On a CronJob's Job: the scheduled time it runs for, RFC 3339 in the CronJob's time zone.
pub const CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION: &str =
    "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// keelson-proxy's LoadBalancer speakers: each renews the Lease `<prefix><node>` in kube-system.
/// NodeRestriction lets a node write its own (the proxy of a joined node runs as the node).
pub const SPEAKER_LEASE_NAMESPACE: &str = "kube-system";
pub const SPEAKER_LEASE_PREFIX: &str = "keelson-speaker-";
