//! What `kubectl auth can-i` and the agents send: authorization.k8s.io/v1 reviews
//! (k8s.io/api/authorization/v1/generated.proto). Status (3) is the server's answer.

use super::meta::OBJECT_META;

message! { RESOURCE_ATTRIBUTES = "ResourceAttributes" {
    1 namespace, 2 verb, 3 group, 4 version, 5 resource, 6 subresource, 7 name,
}}

message! { NON_RESOURCE_ATTRIBUTES = "NonResourceAttributes" { 1 path, 2 verb }}

message! { SELF_ACCESS_SPEC = "SelfSubjectAccessReviewSpec" {
    ptr 1 resourceAttributes Msg(RESOURCE_ATTRIBUTES),
    ptr 2 nonResourceAttributes Msg(NON_RESOURCE_ATTRIBUTES),
}}

message! { ACCESS_SPEC = "SubjectAccessReviewSpec" {
    ptr 1 resourceAttributes Msg(RESOURCE_ATTRIBUTES),
    ptr 2 nonResourceAttributes Msg(NON_RESOURCE_ATTRIBUTES), 3 user, list 4 groups, 6 uid,
    // 5 extra (map of string lists) is not read by Keelson's authorizers.
}}

message! { pub SELF_SUBJECT_ACCESS_REVIEW = "SelfSubjectAccessReview" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(SELF_ACCESS_SPEC),
}}

message! { pub SUBJECT_ACCESS_REVIEW = "SubjectAccessReview" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(ACCESS_SPEC),
}}

message! { pub LOCAL_SUBJECT_ACCESS_REVIEW = "LocalSubjectAccessReview" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(ACCESS_SPEC),
}}

message! { RULES_SPEC = "SelfSubjectRulesReviewSpec" { 1 namespace }}

message! { pub SELF_SUBJECT_RULES_REVIEW = "SelfSubjectRulesReview" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(RULES_SPEC),
}}
