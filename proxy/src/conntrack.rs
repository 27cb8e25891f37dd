//! UDP has no connection teardown: a conntrack entry keeps sending datagrams to an endpoint
//! that went away (or keeps the "rejected" state of a service that gained endpoints) until it
//! times out. After a sync the stale entries are deleted with `conntrack -D`.
//!
//! As kube-proxy does, an endpoint that only turns terminating keeps its flows while it still
//! serves: new flows go to ready endpoints, existing ones finish on the draining pod. They are
//! deleted once the endpoint is removed or stops serving. TCP flows are never touched.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use crate::exec::Runner;
use crate::model::{Endpoint, Protocol, ProxyModel, ServicePort};

/// Whether traffic may flow to the endpoint: serving (ready, or terminating and still serving).
/// A ready endpoint counts even if a slice says it is not serving, since rules send to it.
fn carries_traffic(ep: &Endpoint) -> bool {
    ep.serving || ep.ready
}

/// The (ip, port) of the endpoints of `sp` that may carry traffic.
fn live(sp: Option<&ServicePort>) -> BTreeSet<(Ipv4Addr, u16)> {
    sp.into_iter()
        .flat_map(|s| &s.endpoints)
        .filter(|e| carries_traffic(e))
        .map(|e| (e.ip, e.port))
        .collect()
}

/// Arguments of each `conntrack -D` call needed after moving from `old` to `new`.
pub fn stale_udp_flows(old: &ProxyModel, new: &ProxyModel) -> Vec<Vec<String>> {
    let mut out = BTreeSet::new();
    for (name, old_sp) in old
        .services
        .iter()
        .filter(|(n, _)| n.protocol == Protocol::Udp)
    {
        let kept = live(new.services.get(name));
        for ep in old_sp.endpoints.iter().filter(|e| carries_traffic(e)) {
            if kept.contains(&(ep.ip, ep.port)) {
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
        let had = !live(old.services.get(name)).is_empty();
        if had || live(Some(new_sp)).is_empty() {
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
        with_conditions(eps, proto, true, true, false)
    }

    /// A model whose endpoints all have the given ready, serving and terminating conditions.
    fn with_conditions(
        eps: &[&str],
        proto: Protocol,
        ready: bool,
        serving: bool,
        terminating: bool,
    ) -> ProxyModel {
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
                    ready,
                    serving,
                    terminating,
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

    /// The old model's endpoints, the second one with new conditions.
    fn second_becomes(old: &ProxyModel, ready: bool, serving: bool, term: bool) -> ProxyModel {
        let mut new = old.clone();
        for sp in new.services.values_mut() {
            let ep = &mut sp.endpoints[1];
            (ep.ready, ep.serving, ep.terminating) = (ready, serving, term);
        }
        new
    }

    fn text(flows: Vec<Vec<String>>) -> Vec<String> {
        flows.iter().map(|f| f.join(" ")).collect()
    }

    #[test]
    fn terminating_endpoint_keeps_its_udp_flows_while_it_serves() {
        let old = model(&["10.244.1.2", "10.244.1.3"], Protocol::Udp);
        // Deleted with a grace period: out of new flows (the rules' business), but the flows it
        // has go on while it drains.
        let draining = second_becomes(&old, false, true, true);
        assert!(stale_udp_flows(&old, &draining).is_empty());
        // Removed from the slice: its flows go.
        let gone = model(&["10.244.1.2"], Protocol::Udp);
        assert_eq!(
            text(stale_udp_flows(&draining, &gone)),
            [
                "-D -p udp --orig-dst 10.96.0.53 --dst-nat 10.244.1.3",
                "-D -p udp --orig-port-dst 30053 --dst-nat 10.244.1.3",
            ]
        );
        // Stops serving while terminating (or fails readiness): its flows go too.
        for (ready, term) in [(false, true), (false, false)] {
            let stopped = second_becomes(&old, ready, false, term);
            assert_eq!(
                text(stale_udp_flows(&old, &stopped)),
                [
                    "-D -p udp --orig-dst 10.96.0.53 --dst-nat 10.244.1.3",
                    "-D -p udp --orig-port-dst 30053 --dst-nat 10.244.1.3",
                ]
            );
        }
    }

    #[test]
    fn only_terminating_endpoints_count_as_live_for_rejected_flows() {
        // Only draining endpoints (the fallback that still answers): no rejected state to clear
        // when a ready one arrives, and the draining one's flows stay.
        let draining = with_conditions(&["10.244.1.3"], Protocol::Udp, false, true, true);
        let mut both = model(&["10.244.1.2", "10.244.1.3"], Protocol::Udp);
        for sp in both.services.values_mut() {
            let ep = &mut sp.endpoints[1];
            (ep.ready, ep.terminating) = (false, true);
        }
        assert!(stale_udp_flows(&draining, &both).is_empty());
        // Nothing serving before (unready only): the service's flows without DNAT are cleared.
        let unready = with_conditions(&["10.244.1.3"], Protocol::Udp, false, false, false);
        assert_eq!(
            text(stale_udp_flows(&unready, &both)),
            [
                "-D -p udp --orig-dst 10.96.0.53",
                "-D -p udp --orig-port-dst 30053"
            ]
        );
    }
}
