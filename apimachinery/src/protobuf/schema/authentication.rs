//! What service-account clients send: authentication.k8s.io/v1 TokenRequest (`kubectl create
//! token`) and TokenReview.

use super::meta::OBJECT_META;

message! { pub TOKEN_REQUEST = "TokenRequest" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(TOKEN_REQUEST_SPEC),
    // 3 status is the server's answer; clients' values are not decoded.
}}

message! { TOKEN_REQUEST_SPEC = "TokenRequestSpec" {
    list 1 audiences, ptr 4 expirationSeconds Int64, ptr 3 boundObjectRef Msg(BOUND_OBJECT_REF),
}}

message! { BOUND_OBJECT_REF = "BoundObjectReference" {
    1 kind, 2 apiVersion, 3 name, 4 uid,
}}

message! { pub TOKEN_REVIEW = "TokenReview" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(TOKEN_REVIEW_SPEC),
}}

message! { TOKEN_REVIEW_SPEC = "TokenReviewSpec" { 1 token, list 2 audiences }}
