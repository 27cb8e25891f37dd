//! k8s.io/apimachinery/pkg/apis/meta/v1.

message! { pub OBJECT_META = "ObjectMeta" {
    1 name, 2 generateName, 3 namespace, 4 selfLink, 5 uid, 6 resourceVersion, 7 generation Int64,
    8 creationTimestamp Time, ptr 9 deletionTimestamp Time, ptr 10 deletionGracePeriodSeconds Int64,
    11 labels StringMap, 12 annotations StringMap, list 13 ownerReferences Msg(OWNER_REFERENCE),
    list 14 finalizers,
    // 17 managedFields is server-maintained; clients' values are not decoded.
}}

message! { pub OWNER_REFERENCE = "OwnerReference" {
    5 apiVersion, 1 kind, 3 name, 4 uid, ptr 6 controller Bool, ptr 7 blockOwnerDeletion Bool,
}}

message! { pub LABEL_SELECTOR = "LabelSelector" {
    1 matchLabels StringMap, list 2 matchExpressions Msg(LABEL_SELECTOR_REQUIREMENT),
}}

message! { pub LABEL_SELECTOR_REQUIREMENT = "LabelSelectorRequirement" {
    1 key, 2 operator, list 3 values,
}}

message! { pub DELETE_OPTIONS = "DeleteOptions" {
    ptr 1 gracePeriodSeconds Int64, ptr 2 preconditions Msg(PRECONDITIONS),
    ptr 3 orphanDependents Bool, ptr 4 propagationPolicy, list 5 dryRun,
}}

message! { pub PRECONDITIONS = "Preconditions" { ptr 1 uid, ptr 2 resourceVersion }}
