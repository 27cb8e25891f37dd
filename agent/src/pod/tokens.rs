//! Service-account tokens for projected volumes, as the kubelet's token manager keeps them:
//! requested through TokenRequest with the node's credentials and bound to the pod, cached per
//! pod and source, and renewed once 80% of their lifetime has passed (or 24 hours, whichever
//! comes first). A renewal that fails keeps the old token while it is still valid.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount, ServiceAccountTokenProjection};
use kube::api::{Api, PostParams};

/// Renewals happen at least this often, whatever the token's lifetime.
const MAX_REFRESH: Duration = Duration::from_secs(24 * 3600);

/// What one serviceAccountToken source asks for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenSpec {
    pub audience: Option<String>,
    pub expiration_seconds: i64,
}

impl TokenSpec {
    pub fn of(source: &ServiceAccountTokenProjection) -> TokenSpec {
        TokenSpec {
            audience: source.audience.clone().filter(|a| !a.is_empty()),
            expiration_seconds: source.expiration_seconds.unwrap_or(3600),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("failed to fetch token for service account {namespace}/{service_account}: {reason}")]
pub struct TokenError {
    namespace: String,
    service_account: String,
    reason: String,
}

#[derive(Clone, Debug)]
struct Cached {
    token: String,
    refresh_at: SystemTime,
    expires: SystemTime,
}

/// The tokens of every pod on the node, by pod uid and source.
#[derive(Default)]
pub struct TokenManager {
    cache: Mutex<HashMap<(String, TokenSpec), Cached>>,
}

/// When a token issued at `issued` and expiring at `expires` is renewed.
pub fn refresh_at(issued: SystemTime, expires: SystemTime) -> SystemTime {
    let lifetime = expires.duration_since(issued).unwrap_or_default();
    issued + lifetime.mul_f64(0.8).min(MAX_REFRESH)
}

/// The serviceAccountToken sources of the pod's projected volumes.
pub fn specs(pod: &Pod) -> Vec<TokenSpec> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let mut out: Vec<TokenSpec> = volumes
        .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
        .filter_map(|src| src.service_account_token.as_ref())
        .map(TokenSpec::of)
        .collect();
    out.sort();
    out.dedup();
    out
}

impl TokenManager {
    /// A valid token for every source of the pod, requested or renewed as needed.
    pub async fn for_pod(
        &self,
        client: &kube::Client,
        pod: &Pod,
    ) -> Result<BTreeMap<TokenSpec, String>, TokenError> {
        let mut out = BTreeMap::new();
        for spec in specs(pod) {
            let token = self.get(client, pod, &spec).await?;
            out.insert(spec, token);
        }
        Ok(out)
    }

    async fn get(
        &self,
        client: &kube::Client,
        pod: &Pod,
        spec: &TokenSpec,
    ) -> Result<String, TokenError> {
        let key = (pod.metadata.uid.clone().unwrap_or_default(), spec.clone());
        let now = SystemTime::now();
        let cached = self.lock().get(&key).cloned();
        if let Some(c) = cached.as_ref().filter(|c| now < c.refresh_at) {
            return Ok(c.token.clone());
        }
        match request(client, pod, spec).await {
            Ok(fresh) => {
                let token = fresh.token.clone();
                self.lock().insert(key, fresh);
                Ok(token)
            }
            Err(e) => match cached.filter(|c| now < c.expires) {
                Some(c) => {
                    tracing::warn!(error = %e, "token renewal failed; the current one is still valid");
                    Ok(c.token)
                }
                None => Err(e),
            },
        }
    }

    /// The earliest renewal due among the pod's tokens.
    pub fn next_refresh(&self, pod_uid: &str) -> Option<SystemTime> {
        self.lock()
            .iter()
            .filter(|((uid, _), _)| uid == pod_uid)
            .map(|(_, c)| c.refresh_at)
            .min()
    }

    /// Drops the pod's tokens (it is gone from the node).
    pub fn forget(&self, pod_uid: &str) {
        self.lock().retain(|(uid, _), _| uid != pod_uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, TokenSpec), Cached>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// POST serviceaccounts/{name}/token, bound to the pod.
async fn request(client: &kube::Client, pod: &Pod, spec: &TokenSpec) -> Result<Cached, TokenError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let service_account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": spec.audience.iter().collect::<Vec<_>>(),
            "expirationSeconds": spec.expiration_seconds,
            "boundObjectRef": {
                "apiVersion": "v1", "kind": "Pod",
                "name": pod.metadata.name, "uid": pod.metadata.uid,
            },
        },
    });
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let issued = SystemTime::now();
    let answer: TokenRequest = api
        .create_subresource("token", &service_account, &PostParams::default(), &body)
        .await
        .map_err(|e| TokenError {
            namespace: namespace.clone(),
            service_account: service_account.clone(),
            reason: e.to_string(),
        })?;
    let status = answer.status.unwrap_or_default();
    let token = status.token.filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(TokenError {
            namespace,
            service_account,
            reason: "the TokenRequest's answer holds no token".into(),
        });
    };
    let expires = status
        .expiration_timestamp
        .map(|t| t.0.as_second())
        .and_then(|s| u64::try_from(s).ok())
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
        .unwrap_or(issued);
    Ok(Cached {
        token,
        refresh_at: refresh_at(issued, expires),
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewed_at_eighty_percent_or_a_day() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = t0 + Duration::from_secs(3600);
        assert_eq!(refresh_at(t0, hour), t0 + Duration::from_secs(2880));
        let year = t0 + Duration::from_secs(365 * 24 * 3600);
        assert_eq!(refresh_at(t0, year), t0 + MAX_REFRESH);
        assert_eq!(
            refresh_at(t0, t0),
            t0,
            "an already expired token is renewed now"
        );
    }

    #[test]
    fn one_spec_per_distinct_source() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": [
                {"name": "a", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"serviceAccountToken": {"path": "vault", "audience": "vault"}},
                ]}},
                {"name": "b", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                ]}},
            ]},
        }))
        .unwrap();
        assert_eq!(
            specs(&pod),
            vec![
                TokenSpec {
                    audience: None,
                    expiration_seconds: 3607
                },
                TokenSpec {
                    audience: Some("vault".into()),
                    expiration_seconds: 3600
                },
            ]
        );
    }
}
