//! What `kubectl create role|clusterrole|rolebinding|clusterrolebinding` sends:
//! rbac.authorization.k8s.io/v1 (k8s.io/api/rbac/v1/generated.proto).

use super::meta::OBJECT_META;

message! { POLICY_RULE = "PolicyRule" {
    list 1 verbs, list 2 apiGroups, list 3 resources, list 4 resourceNames,
    list 5 nonResourceURLs,
}}

message! { pub ROLE = "Role" { 1 metadata Msg(OBJECT_META), list 2 rules Msg(POLICY_RULE) }}

message! { pub CLUSTER_ROLE = "ClusterRole" {
    1 metadata Msg(OBJECT_META), list 2 rules Msg(POLICY_RULE),
    // 3 aggregationRule: aggregation is not served.
}}

message! { SUBJECT = "Subject" { 1 kind, 2 apiGroup, 3 name, 4 namespace }}

message! { ROLE_REF = "RoleRef" { 1 apiGroup, 2 kind, 3 name }}

message! { pub ROLE_BINDING = "RoleBinding" {
    1 metadata Msg(OBJECT_META), list 2 subjects Msg(SUBJECT), 3 roleRef Msg(ROLE_REF),
}}

message! { pub CLUSTER_ROLE_BINDING = "ClusterRoleBinding" {
    1 metadata Msg(OBJECT_META), list 2 subjects Msg(SUBJECT), 3 roleRef Msg(ROLE_REF),
}}
