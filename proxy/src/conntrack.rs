//! UDP has no connection teardown: a conntrack entry keeps sending datagrams to an endpoint
//! that went away (or keeps the "rejected" state of a service that gained endpoints) until it
//! times out. After a sync the stale entries are deleted with `conntrack -D`.

use std::collections::BTreeSet;

use crate::exec::Runner;
use crate::model::{Protocol, ProxyModel, ServicePort};

/// Arguments of each `conntrack -D` call needed after moving from `old` to `new`.
pub fn stale_udp_flows(old: &ProxyModel, new: &ProxyModel) -> Vec<Vec<String>> {
    let mut out = BTreeSet::new();
    for (name, old_sp) in old
        .services
        .iter()
        .filter(|(n, _)| n.protocol == Protocol::Udp)
    {
        let new_sp = new.services.get(name);
        let kept: BTreeSet<_> = new_sp
            .map(|s| s.used_endpoints().into_iter().map(|e| e.ip).collect())
            .unwrap_or_default();
        for ep in old_sp.used_endpoints() {
            if kept.contains(&ep.ip) {
                continue;
            }
            for dst in destinations(old_sp) {
                out.insert(args(&["--orig-dst", &dst, "--dst-nat", &ep.ip.to_string()]));
            }
            if let Some(np) = old_sp.node_port {
                out.insert(args(&[
                    "--orig-port-dst",
                    &np.to_string(),
                    "--dst-nat",
                    &ep.ip.to_string(),
                ]));
            }
        }
    }
    // Datagrams sent while a service had no endpoints left entries that bypass the new DNAT.
    for (name, new_sp) in new
        .services
        .iter()
        .filter(|(n, _)| n.protocol == Protocol::Udp)
    {
        let had = old
            .services
            .get(name)
            .is_some_and(|s| !s.used_endpoints().is_empty());
        if had || new_sp.used_endpoints().is_empty() {
            continue;
        }
        for dst in destinations(new_sp) {
            out.insert(args(&["--orig-dst", &dst]));
        }
        if let Some(np) = new_sp.node_port {
            out.insert(args(&["--orig-port-dst", &np.to_string()]));
        }
    }
    out.into_iter()
        .map(|mut a| {
            let mut full = vec!["-D".to_string(), "-p".to_string(), "udp".to_string()];
            full.append(&mut a);
            full
        })
        .collect()
}

fn destinations(sp: &ServicePort) -> Vec<String> {
    std::iter::once(sp.cluster_ip)
        .chain(sp.external_ips.iter().copied())
        .map(|ip| ip.to_string())
        .collect()
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Runs the deletions. `conntrack -D` exits 1 when nothing matched, which is fine.
pub fn delete_flows(runner: &dyn Runner, flows: &[Vec<String>]) {
    for flow in flows {
        let refs: Vec<&str> = flow.iter().map(String::as_str).collect();
        match runner.run("conntrack", &refs, None) {
            Ok(out) if out.success() || out.stderr.contains("0 flow entries") => {}
            Ok(out) => {
                tracing::warn!(args = ?flow, stderr = %out.stderr.trim(), "conntrack -D failed")
            }
            Err(e) => tracing::warn!(error = %e, "cannot run conntrack"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, ServicePort, ServicePortName};
    use std::collections::BTreeMap;

    fn model(eps: &[&str], proto: Protocol) -> ProxyModel {
        let name = ServicePortName {
            namespace: "default".into(),
            name: "dns".into(),
            port_name: String::new(),
            protocol: proto,
        };
        let sp = ServicePort {
            name: name.clone(),
            cluster_ip: "10.96.0.53".parse().unwrap(),
            port: 53,
            node_port: Some(30053),
            external_ips: Vec::new(),
            affinity_timeout: None,
            internal_local: false,
            external_local: false,
            endpoints: eps
                .iter()
                .map(|ip| Endpoint {
                    ip: ip.parse().unwrap(),
                    port: 5353,
                    ready: true,
                    serving: true,
                    terminating: false,
                    local: false,
                })
                .collect(),
        };
        ProxyModel {
            services: BTreeMap::from([(name, sp)]),
            ..Default::default()
        }
    }

    #[test]
    fn removed_udp_endpoint_flows_are_deleted() {
        let old = model(&["10.244.1.2", "10.244.1.3"], Protocol::Udp);
        let new = model(&["10.244.1.2"], Protocol::Udp);
        let flows = stale_udp_flows(&old, &new);
        let text: Vec<String> = flows.iter().map(|f| f.join(" ")).collect();
        assert_eq!(
            text,
            [
                "-D -p udp --orig-dst 10.96.0.53 --dst-nat 10.244.1.3",
                "-D -p udp --orig-port-dst 30053 --dst-nat 10.244.1.3",
            ]
        );
        // TCP needs nothing: connections end on their own.
        let old = model(&["10.244.1.2", "10.244.1.3"], Protocol::Tcp);
        assert!(stale_udp_flows(&old, &model(&["10.244.1.2"], Protocol::Tcp)).is_empty());
    }

    #[test]
    fn service_gaining_endpoints_clears_rejected_flows() {
        let flows = stale_udp_flows(
            &model(&[], Protocol::Udp),
            &model(&["10.244.1.2"], Protocol::Udp),
        );
        let text: Vec<String> = flows.iter().map(|f| f.join(" ")).collect();
        assert_eq!(
            text,
            [
                "-D -p udp --orig-dst 10.96.0.53",
                "-D -p udp --orig-port-dst 30053"
            ]
        );
    }
}
