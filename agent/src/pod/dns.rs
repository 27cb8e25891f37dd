//! A pod's resolv.conf (CRI DNSConfig) as the kubelet's DNS configurer makes it: dnsPolicy
//! (ClusterFirst, ClusterFirstWithHostNet, Default, None), the cluster DNS servers and search
//! path, the node's resolv.conf, the pod's dnsConfig merged in, and the limits. Pure except
//! `HostDns::read`.

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig};
use keelson_proto::runtime::v1 as cri;

/// The node's resolver configuration, as the kubelet's default --resolv-conf.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
/// Upstream's validation limits (MaxDNSNameservers, MaxDNSSearchPaths, MaxDNSSearchListChars).
pub const MAX_NAMESERVERS: usize = 3;
pub const MAX_SEARCHES: usize = 32;
pub const MAX_SEARCH_CHARS: usize = 2048;

/// nameserver, search and options lines of a resolv.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostDns {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

impl HostDns {
    /// As the kubelet parses it: every `nameserver`, the last `search` line (trailing dots
    /// dropped), every `options` entry; comments and other lines ignored.
    pub fn parse(text: &str) -> HostDns {
        let mut host = HostDns::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or_default();
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("nameserver") => host.servers.extend(fields.next().map(String::from)),
                Some("search") => {
                    host.searches = fields
                        .map(|s| s.trim_end_matches('.').to_string())
                        .collect()
                }
                Some("options") => host.options.extend(fields.map(String::from)),
                _ => {}
            }
        }
        host
    }

    /// The node's resolv.conf; None when it cannot be read (the runtime's own default then).
    pub fn read(path: &str) -> Option<HostDns> {
        match std::fs::read_to_string(path) {
            Ok(text) => Some(HostDns::parse(&text)),
            Err(e) => {
                tracing::warn!(path, error = %e, "cannot read the node's resolv.conf");
                None
            }
        }
    }
}

/// Which base a pod's DNS settings start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// The cluster DNS servers and search path.
    Cluster,
    /// The node's resolv.conf.
    Host,
    /// Nothing: only the pod's dnsConfig.
    None,
}

/// dnsPolicy to a base. ClusterFirst on a hostNetwork pod is Default, as upstream; ClusterFirst
/// without --cluster-dns falls back to Default too (the second value says so, to warn).
pub fn base(pod: &Pod, have_cluster_dns: bool) -> (Base, bool) {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let cluster = match policy {
        "None" => return (Base::None, false),
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        _ => false,
    };
    match (cluster, have_cluster_dns) {
        (true, true) => (Base::Cluster, false),
        (true, false) => (Base::Host, true),
        (false, _) => (Base::Host, false),
    }
}

/// The pod's DNS config. `host` is the node's resolv.conf (None: unreadable, and then a
/// Default pod without dnsConfig gets None, the runtime's default).
pub fn pod_dns_config(
    cluster_dns: &[String],
    cluster_domain: &str,
    host: Option<&HostDns>,
    pod: &Pod,
) -> Option<cri::DnsConfig> {
    let (base, _) = base(pod, !cluster_dns.is_empty());
    let custom = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref());
    let host_cfg = host.map(|h| cri::DnsConfig {
        servers: h.servers.clone(),
        searches: h.searches.clone(),
        options: h.options.clone(),
    });
    let mut config = match base {
        Base::None => cri::DnsConfig::default(),
        Base::Host => match (host_cfg, custom) {
            (Some(h), _) => h,
            (None, None) => return None,
            (None, Some(_)) => cri::DnsConfig::default(),
        },
        Base::Cluster => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let mut searches = vec![
                format!("{ns}.svc.{cluster_domain}"),
                format!("svc.{cluster_domain}"),
                cluster_domain.to_string(),
            ];
            searches.extend(host.map(|h| h.searches.clone()).unwrap_or_default());
            cri::DnsConfig {
                servers: cluster_dns.to_vec(),
                searches: dedup(searches),
                options: vec!["ndots:5".into()],
            }
        }
    };
    if let Some(custom) = custom {
        config = append_custom(config, custom);
    }
    Some(fit_limits(config))
}

/// dnsConfig's nameservers and searches appended (duplicates dropped); its options replace
/// same-named ones, as upstream's appendDNSConfig.
fn append_custom(mut config: cri::DnsConfig, custom: &PodDNSConfig) -> cri::DnsConfig {
    config
        .servers
        .extend(custom.nameservers.iter().flatten().cloned());
    config.servers = dedup(config.servers);
    config
        .searches
        .extend(custom.searches.iter().flatten().cloned());
    config.searches = dedup(config.searches);
    for o in custom.options.iter().flatten() {
        let name = o.name.clone().unwrap_or_default();
        let option = match &o.value {
            Some(v) if !v.is_empty() => format!("{name}:{v}"),
            _ => name.clone(),
        };
        let same = |existing: &String| existing.split(':').next() == Some(name.as_str());
        match config.options.iter_mut().find(|e| same(e)) {
            Some(existing) => *existing = option,
            None => config.options.push(option),
        }
    }
    config
}

/// At most 3 nameservers, 32 search domains and 2048 characters of search line; the rest is
/// dropped, as the kubelet does (it warns; the pod still starts).
fn fit_limits(mut config: cri::DnsConfig) -> cri::DnsConfig {
    if config.servers.len() > MAX_NAMESERVERS {
        tracing::warn!(servers = ?config.servers, "more than {MAX_NAMESERVERS} nameservers; the first ones are kept");
        config.servers.truncate(MAX_NAMESERVERS);
    }
    if config.searches.len() > MAX_SEARCHES {
        tracing::warn!("more than {MAX_SEARCHES} search domains; the first ones are kept");
        config.searches.truncate(MAX_SEARCHES);
    }
    while config.searches.join(" ").len() > MAX_SEARCH_CHARS {
        config.searches.pop();
    }
    config
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;
