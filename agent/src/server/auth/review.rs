//! What port 10250 asks the API server, with the agent's own credentials (as the kubelet's
//! --authentication-token-webhook and --authorization-mode=Webhook do): whose a bearer token is
//! (a TokenReview) and whether that user may do something to this node (a SubjectAccessReview).
//! Behind a trait, so the port's decisions are tested without an API server.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;

use super::attributes::{self, Attributes};

/// An authenticated user, as the API server's authenticators name one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A SubjectAccessReview's answer: only `allowed` lets the request through (a review that
/// neither allows nor denies is a refusal, as in the kubelet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Why, as the API server said it (may be empty).
    pub reason: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReviewError {
    #[error("{review} through the API server failed: {message}")]
    Api {
        review: &'static str,
        message: String,
    },
}

#[async_trait::async_trait]
pub trait Reviews: Send + Sync {
    /// The user `token` authenticates, or None when the API server does not know it.
    async fn token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError>;
    /// Whether `user` may do `attrs` to this node.
    async fn access(&self, user: &UserInfo, attrs: &Attributes) -> Result<Decision, ReviewError>;
}

/// The reviews made through the API server.
pub struct ApiReviews {
    pub client: kube::Client,
}

#[async_trait::async_trait]
impl Reviews for ApiReviews {
    async fn token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = kube::Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| api_error("TokenReview", e))?;
        let Some(status) = answer.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        let name = user.username.unwrap_or_default();
        Ok((!name.is_empty()).then(|| UserInfo {
            name,
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }

    async fn access(&self, user: &UserInfo, attrs: &Attributes) -> Result<Decision, ReviewError> {
        let review = SubjectAccessReview {
            spec: access_review_spec(user, attrs),
            ..Default::default()
        };
        let answer = kube::Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| api_error("SubjectAccessReview", e))?;
        let status = answer.status.unwrap_or_default();
        let reason = match (status.reason, status.evaluation_error) {
            (Some(r), _) if !r.is_empty() => r,
            (_, Some(e)) => e,
            _ => String::new(),
        };
        Ok(Decision {
            allowed: status.allowed,
            reason,
        })
    }
}

/// The review's spec: the user as authenticated, the request as `attributes::of` maps it.
pub fn access_review_spec(user: &UserInfo, attrs: &Attributes) -> SubjectAccessReviewSpec {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    SubjectAccessReviewSpec {
        user: some(&user.name),
        uid: some(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        resource_attributes: Some(ResourceAttributes {
            verb: Some(attrs.verb.to_string()),
            group: Some(String::new()),
            version: Some("v1".to_string()),
            resource: Some(attributes::RESOURCE.to_string()),
            subresource: Some(attrs.subresource.to_string()),
            name: Some(attrs.name.clone()),
            ..Default::default()
        }),
        non_resource_attributes: None,
    }
}

fn api_error(review: &'static str, e: kube::Error) -> ReviewError {
    ReviewError::Api {
        review,
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_access_review_names_the_user_and_the_nodes_subresource() {
        let user = UserInfo {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        };
        let attrs = attributes::of(&http::Method::GET, "/containerLogs/a/b/c", "n1");
        let spec = serde_json::to_value(access_review_spec(&user, &attrs)).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "alice",
                "groups": ["dev", "system:authenticated"],
                "resourceAttributes": {
                    "verb": "get", "group": "", "version": "v1", "resource": "nodes",
                    "subresource": "proxy", "name": "n1"
                }
            })
        );
    }
}
