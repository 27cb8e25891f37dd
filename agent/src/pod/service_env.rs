//! Docker-link style variables for Services (`KUBERNETES_SERVICE_HOST` and friends), as the
//! kubelet sets them. The `kubernetes` Service in `default` is always linked, whatever
//! `enableServiceLinks` says: in-cluster clients (kubectl, kube-rs, client-go) find the API
//! server through it.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
// tokio's clock, so that tests can move it.
use tokio::time::Instant;

/// How long the `kubernetes` Service is reused before it is read again: it changes only when
/// the API server's address does, and a pod burst should not cost one GET per container.
const MASTER_SERVICE_TTL: Duration = Duration::from_secs(30);

/// The variables for one Service: `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`,
/// `<NAME>_SERVICE_PORT_<PORTNAME>`, `<NAME>_PORT` and `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`.
/// Headless Services and Services without ports get none, as upstream.
pub fn service_env(svc: &Service) -> Vec<(String, String)> {
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.as_deref().unwrap_or("");
    let ports = spec.ports.as_deref().unwrap_or(&[]);
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    if ip.is_empty() || ip == "None" {
        return Vec::new();
    }
    let name = svc
        .metadata
        .name
        .as_deref()
        .unwrap_or("")
        .to_uppercase()
        .replace('-', "_");
    let mut env = vec![
        (format!("{name}_SERVICE_HOST"), ip.to_string()),
        (format!("{name}_SERVICE_PORT"), first.port.to_string()),
    ];
    for p in ports {
        if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let key = port_name.to_uppercase().replace('-', "_");
            env.push((format!("{name}_SERVICE_PORT_{key}"), p.port.to_string()));
        }
    }
    let proto = |p: &k8s_openapi::api::core::v1::ServicePort| {
        p.protocol.as_deref().unwrap_or("TCP").to_string()
    };
    env.push((
        format!("{name}_PORT"),
        format!("{}://{ip}:{}", proto(first).to_lowercase(), first.port),
    ));
    for p in ports {
        let (proto, port) = (proto(p), p.port);
        let prefix = format!("{name}_PORT_{port}_{proto}");
        let lower = proto.to_lowercase();
        env.push((prefix.clone(), format!("{lower}://{ip}:{port}")));
        env.push((format!("{prefix}_PROTO"), lower));
        env.push((format!("{prefix}_PORT"), port.to_string()));
        env.push((format!("{prefix}_ADDR"), ip.to_string()));
    }
    env
}

/// Adds `links` in front of `env`, leaving out names the container sets itself (its own
/// value wins, as upstream).
pub fn merge(links: Vec<(String, String)>, env: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = links
        .into_iter()
        .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
        .collect();
    out.extend(env);
    out
}

/// Environment variables, in the order the container gets them.
pub type Env = Vec<(String, String)>;

/// The `kubernetes` Service's variables, read through the API and kept for a short while.
#[derive(Default)]
pub struct MasterService {
    cached: Mutex<Option<(Instant, Env)>>,
}

impl MasterService {
    /// Empty when the Service cannot be read (an API server without it, or a brief outage):
    /// the pod still starts, as the kubelet starts it without links it cannot resolve.
    pub async fn env(&self, client: &kube::Client) -> Env {
        let api = kube::Api::<Service>::namespaced(client.clone(), "default");
        self.env_from(|| async move { api.get_opt("kubernetes").await })
            .await
    }

    /// The kept variables while fresh, else `read`'s, kept. The lock is not held while reading:
    /// every container start asks, and one slow GET must not hold the others up (misses at the
    /// same time may each read; the last to finish is kept). A failed read gives the last ones.
    async fn env_from<F, Fut, E>(&self, read: F) -> Env
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<Service>, E>>,
        E: std::fmt::Display,
    {
        if let Some((at, env)) = self.lock().as_ref() {
            if at.elapsed() < MASTER_SERVICE_TTL {
                return env.clone();
            }
        }
        let env = match read().await {
            Ok(Some(svc)) => service_env(&svc),
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::debug!(error = %e, "reading Service default/kubernetes");
                return self
                    .lock()
                    .as_ref()
                    .map(|(_, env)| env.clone())
                    .unwrap_or_default();
            }
        };
        *self.lock() = Some((Instant::now(), env.clone()));
        env
    }

    fn lock(&self) -> MutexGuard<'_, Option<(Instant, Env)>> {
        // Nothing can panic while holding it; a poisoned cache is still a valid one.
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": ports}
        }))
        .unwrap()
    }

    #[test]
    fn kubernetes_service_gives_what_in_cluster_clients_read() {
        let svc = service(
            "kubernetes",
            "10.96.0.1",
            serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
        );
        let env = service_env(&svc);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT"), Some("tcp://10.96.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP"), Some("tcp://10.96.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_PROTO"), Some("tcp"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_ADDR"), Some("10.96.0.1"));
    }

    #[test]
    fn dashes_become_underscores_and_headless_services_get_nothing() {
        let svc = service("my-db", "10.96.3.4", serde_json::json!([{"port": 5432}]));
        assert!(service_env(&svc)
            .iter()
            .any(|(k, v)| k == "MY_DB_SERVICE_HOST" && v == "10.96.3.4"));
        let headless = service("h", "None", serde_json::json!([{"port": 80}]));
        assert!(service_env(&headless).is_empty());
    }

    #[test]
    fn the_containers_own_value_wins() {
        let links = vec![
            (
                "KUBERNETES_SERVICE_HOST".to_string(),
                "10.96.0.1".to_string(),
            ),
            ("KUBERNETES_SERVICE_PORT".to_string(), "443".to_string()),
        ];
        let own = vec![(
            "KUBERNETES_SERVICE_HOST".to_string(),
            "api.example".to_string(),
        )];
        assert_eq!(
            merge(links, own),
            vec![
                ("KUBERNETES_SERVICE_PORT".to_string(), "443".to_string()),
                (
                    "KUBERNETES_SERVICE_HOST".to_string(),
                    "api.example".to_string()
                ),
            ]
        );
    }

    type Read = Result<Option<Service>, String>;

    fn kubernetes(ip: &str) -> Read {
        Ok(Some(service(
            "kubernetes",
            ip,
            serde_json::json!([{"name": "https", "port": 443}]),
        )))
    }

    fn host(env: &Env) -> Option<&str> {
        env.iter()
            .find(|(k, _)| k == "KUBERNETES_SERVICE_HOST")
            .map(|(_, v)| v.as_str())
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_is_read_again_after_30_seconds_and_kept_through_a_failed_read() {
        let master = MasterService::default();
        let env = master.env_from(|| async { kubernetes("10.96.0.1") }).await;
        assert_eq!(host(&env), Some("10.96.0.1"));
        tokio::time::advance(Duration::from_secs(29)).await;
        let env = master.env_from(|| async { kubernetes("10.96.0.2") }).await;
        assert_eq!(host(&env), Some("10.96.0.1"), "kept for 30 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        let env = master.env_from(|| async { kubernetes("10.96.0.2") }).await;
        assert_eq!(host(&env), Some("10.96.0.2"), "read again");
        tokio::time::advance(MASTER_SERVICE_TTL).await;
        let failed = || async { Read::Err("connection refused".into()) };
        assert_eq!(host(&master.env_from(failed).await), Some("10.96.0.2"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_read_does_not_hold_up_other_container_starts() {
        let master = MasterService::default();
        let slow = master.env_from(std::future::pending::<Read>);
        let other = master.env_from(|| async { kubernetes("10.96.0.1") });
        let raced = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                biased;
                _ = slow => None,
                env = other => Some(env),
            }
        });
        let env = raced
            .await
            .expect("the second start waited for the first one's read");
        assert_eq!(host(&env.unwrap()), Some("10.96.0.1"));
    }
}
