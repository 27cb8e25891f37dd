//! What node joining and draining send: certificates.k8s.io/v1 CertificateSigningRequest,
//! policy/v1 Eviction and authentication.k8s.io/v1 SelfSubjectReview.

use super::meta::{DELETE_OPTIONS, OBJECT_META};

message! { pub CSR = "CertificateSigningRequest" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(CSR_SPEC), 3 status Msg(CSR_STATUS),
}}

message! { CSR_SPEC = "CertificateSigningRequestSpec" {
    1 request Bytes, 7 signerName, ptr 8 expirationSeconds Int32, list 5 usages, 2 username,
    3 uid, list 4 groups,
    // 6 extra is set by the server from the requester; clients' values are not decoded.
}}

message! { CSR_STATUS = "CertificateSigningRequestStatus" {
    list 1 conditions Msg(CSR_CONDITION), 2 certificate Bytes,
}}

message! { CSR_CONDITION = "CertificateSigningRequestCondition" {
    1 type, 6 status, 2 reason, 3 message, 4 lastUpdateTime Time, 5 lastTransitionTime Time,
}}

message! { pub EVICTION = "Eviction" {
    1 metadata Msg(OBJECT_META), ptr 2 deleteOptions Msg(DELETE_OPTIONS),
}}

message! { pub SELF_SUBJECT_REVIEW = "SelfSubjectReview" { 1 metadata Msg(OBJECT_META) }}
