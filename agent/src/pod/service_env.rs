//! Docker-link style variables for Services (`WEB_SERVICE_HOST`, `WEB_PORT_80_TCP_ADDR` and
//! friends), as the kubelet sets them: every Service with a ClusterIP in the pod's namespace
//! when `enableServiceLinks` (default true), and the `kubernetes` Service in `default` always,
//! whatever `enableServiceLinks` says: in-cluster clients (kubectl, kube-rs, client-go) find the
//! API server through it. Services come from a watch (the node may list and watch them, as the
//! kubelet's role allows), so a container start costs no API request.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use keelson_daemon::{reflect, Changes, Objects};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

/// How long a container start waits for the first list of Services (only right after the
/// agent starts); after that it starts without the links of its namespace, with a warning, and
/// later starts do not wait again (the API server is down: pods keep starting).
const FIRST_LIST_WAIT: Duration = Duration::from_secs(30);

/// Environment variables, in the order the container gets them.
pub type Env = Vec<(String, String)>;

/// Every Service, from a watch.
pub struct ServiceLinks {
    services: Objects<Service>,
    /// Set once a start has waited the whole FIRST_LIST_WAIT.
    gave_up: AtomicBool,
}

impl ServiceLinks {
    /// Starts the watch on the current Tokio runtime.
    pub fn start(client: kube::Client) -> ServiceLinks {
        let services = reflect(
            Api::<Service>::all(client),
            watcher::Config::default(),
            &Changes::default(),
        );
        ServiceLinks::from_store(services)
    }

    /// Links from a store filled some other way (tests: a fixed list of Services).
    pub fn from_store(services: Objects<Service>) -> ServiceLinks {
        ServiceLinks {
            services,
            gave_up: AtomicBool::new(false),
        }
    }

    /// The link variables for `pod`'s containers.
    pub async fn env(&self, pod: &Pod) -> Env {
        let wait = if self.gave_up.load(Ordering::Relaxed) {
            Duration::ZERO
        } else {
            FIRST_LIST_WAIT
        };
        let ready = tokio::time::timeout(wait, self.services.synced()).await;
        if ready.is_err() {
            self.gave_up.store(true, Ordering::Relaxed);
            tracing::warn!(pod = %pod.name_any(), "Services not listed yet: starting without their variables");
        }
        let services = self.services.state();
        links(pod, services.iter().map(|s| s.as_ref()))
    }
}

/// Which Services `pod` links to, and their variables, as the kubelet chooses them: one per
/// name, the pod's namespace's over `default`'s `kubernetes`; sorted by name. Pure.
pub fn links<'a>(pod: &Pod, services: impl IntoIterator<Item = &'a Service>) -> Env {
    let ns = pod.namespace().unwrap_or_default();
    let enabled = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let mut chosen: BTreeMap<String, &Service> = BTreeMap::new();
    for svc in services.into_iter().filter(|s| cluster_ip(s).is_some()) {
        let (name, svc_ns) = (svc.name_any(), svc.namespace().unwrap_or_default());
        if svc_ns == "default" && name == "kubernetes" {
            chosen.entry(name).or_insert(svc);
        } else if svc_ns == ns && enabled {
            chosen.insert(name, svc);
        }
    }
    chosen.values().flat_map(|s| service_env(s)).collect()
}

/// The ClusterIP, unless headless (`None`) or unset (ExternalName).
fn cluster_ip(svc: &Service) -> Option<&str> {
    let ip = svc.spec.as_ref()?.cluster_ip.as_deref()?;
    (!ip.is_empty() && ip != "None").then_some(ip)
}

/// `ip:port`, with an IPv6 address in brackets (Go's net.JoinHostPort).
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The kubelet's variable name for a Service or port name: upper case, dashes to underscores.
fn env_name(name: &str) -> String {
    name.to_uppercase().replace('-', "_")
}

/// The variables for one Service: `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`,
/// `<NAME>_SERVICE_PORT_<PORTNAME>`, `<NAME>_PORT` and `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`.
/// Headless Services and Services without ports get none, as upstream.
pub fn service_env(svc: &Service) -> Vec<(String, String)> {
    let (Some(ip), Some(spec)) = (cluster_ip(svc), svc.spec.as_ref()) else {
        return Vec::new();
    };
    let ports = spec.ports.as_deref().unwrap_or(&[]);
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let name = env_name(&svc.name_any());
    let mut env = vec![
        (format!("{name}_SERVICE_HOST"), ip.to_string()),
        (format!("{name}_SERVICE_PORT"), first.port.to_string()),
    ];
    for p in ports {
        if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let key = env_name(port_name);
            env.push((format!("{name}_SERVICE_PORT_{key}"), p.port.to_string()));
        }
    }
    let proto = |p: &ServicePort| p.protocol.as_deref().unwrap_or("TCP").to_uppercase();
    // Docker special-cases the first port.
    env.push((
        format!("{name}_PORT"),
        format!(
            "{}://{}",
            proto(first).to_lowercase(),
            host_port(ip, first.port)
        ),
    ));
    for p in ports {
        let (proto, port) = (proto(p), p.port);
        let prefix = format!("{name}_PORT_{port}_{proto}");
        let lower = proto.to_lowercase();
        env.push((prefix.clone(), format!("{lower}://{}", host_port(ip, port))));
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

    fn in_ns(mut svc: Service, ns: &str) -> Service {
        svc.metadata.namespace = Some(ns.into());
        svc
    }

    fn pod(ns: &str, links: Option<bool>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [], "enableServiceLinks": links},
        }))
        .unwrap()
    }

    fn names(env: &Env) -> Vec<&str> {
        env.iter()
            .filter(|(k, _)| k.ends_with("_SERVICE_HOST"))
            .map(|(k, v)| {
                assert!(!v.is_empty());
                k.as_str()
            })
            .collect()
    }

    #[test]
    fn a_pod_links_to_its_namespaces_services_and_always_to_kubernetes() {
        let port = serde_json::json!([{"name": "http", "port": 80}]);
        let services = [
            service(
                "kubernetes",
                "10.96.0.1",
                serde_json::json!([{"port": 443}]),
            ),
            in_ns(service("web", "10.96.0.20", port.clone()), "shop"),
            in_ns(service("db", "None", port.clone()), "shop"),
            in_ns(service("other", "10.96.0.30", port.clone()), "elsewhere"),
            in_ns(
                service("ext", "", serde_json::json!([{"port": 80}])),
                "shop",
            ),
        ];
        let env = links(&pod("shop", None), &services);
        assert_eq!(names(&env), ["KUBERNETES_SERVICE_HOST", "WEB_SERVICE_HOST"]);
        assert!(env.contains(&("WEB_PORT_80_TCP_ADDR".into(), "10.96.0.20".into())));
        assert!(env.contains(&("WEB_SERVICE_PORT_HTTP".into(), "80".into())));
        // enableServiceLinks: false keeps only the API server's.
        let env = links(&pod("shop", Some(false)), &services);
        assert_eq!(names(&env), ["KUBERNETES_SERVICE_HOST"]);
        // In `default`, every Service there.
        let mut more = services.to_vec();
        more.push(service("cache", "10.96.0.40", port));
        let env = links(&pod("default", None), &more);
        assert_eq!(
            names(&env),
            ["CACHE_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"]
        );
    }

    #[test]
    fn the_namespaces_own_kubernetes_service_wins_over_defaults() {
        let port = serde_json::json!([{"port": 443}]);
        let own = in_ns(service("kubernetes", "10.96.9.9", port.clone()), "shop");
        let api = service("kubernetes", "10.96.0.1", port);
        for order in [[&own, &api], [&api, &own]] {
            let env = links(&pod("shop", None), order);
            let host = env.iter().find(|(k, _)| k == "KUBERNETES_SERVICE_HOST");
            assert_eq!(host.map(|(_, v)| v.as_str()), Some("10.96.9.9"));
        }
    }

    #[test]
    fn ipv6_addresses_are_bracketed_in_urls_only() {
        let svc = service(
            "web",
            "fd00::10",
            serde_json::json!([{"port": 80, "protocol": "UDP"}]),
        );
        let env = service_env(&svc);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("WEB_PORT"), Some("udp://[fd00::10]:80"));
        assert_eq!(get("WEB_PORT_80_UDP"), Some("udp://[fd00::10]:80"));
        assert_eq!(get("WEB_PORT_80_UDP_ADDR"), Some("fd00::10"));
        assert_eq!(get("WEB_PORT_80_UDP_PROTO"), Some("udp"));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_first_list_only_the_first_start_waits() {
        let links = ServiceLinks::from_store(Objects::default());
        let p = pod("shop", None);
        let start = tokio::time::Instant::now();
        assert!(links.env(&p).await.is_empty());
        assert_eq!(start.elapsed(), FIRST_LIST_WAIT);
        let again = tokio::time::Instant::now();
        assert!(links.env(&p).await.is_empty());
        assert_eq!(again.elapsed(), Duration::ZERO);
    }
}
