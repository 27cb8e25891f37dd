//! The proxy's view of the cluster: one `ServicePort` per (Service, port) with its endpoints.
//! Backends render rules from this model only, so rendering never touches Kubernetes types.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

/// Transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Parses the Kubernetes spelling ("TCP"); `None` means the API default, TCP.
    pub fn from_k8s(value: Option<&str>) -> Option<Protocol> {
        match value.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The Kubernetes spelling, also used in kube-proxy's chain-name hashes.
    pub fn k8s_name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }

    /// The lower-case spelling used by iptables and nft.
    pub fn lower(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// Identifies one port of one Service, like kube-proxy's ServicePortName.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePortName {
    pub namespace: String,
    pub name: String,
    /// The Service port's name; empty for a Service's single unnamed port.
    pub port_name: String,
    pub protocol: Protocol,
}

impl fmt::Display for ServicePortName {
    /// "namespace/name:port", or "namespace/name" for an unnamed port (kube-proxy's spelling).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if !self.port_name.is_empty() {
            write!(f, ":{}", self.port_name)?;
        }
        Ok(())
    }
}

/// One backend address of a Service port, with the EndpointSlice conditions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    /// The port resolved by the EndpointSlice (so named targetPorts differ per endpoint).
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// The endpoint runs on this proxy's node.
    pub local: bool,
}

impl Endpoint {
    /// "ip:port", the spelling kube-proxy hashes and prints.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    fn serving_terminating(&self) -> bool {
        self.serving && self.terminating
    }
}

/// Everything the rules need about one Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub name: ServicePortName,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    pub node_port: Option<u16>,
    pub external_ips: Vec<Ipv4Addr>,
    /// `Some(seconds)` when sessionAffinity is ClientIP.
    pub affinity_timeout: Option<u32>,
    /// internalTrafficPolicy: Local.
    pub internal_local: bool,
    /// externalTrafficPolicy: Local.
    pub external_local: bool,
    /// All endpoints known for this port, sorted, one per ip:port.
    pub endpoints: Vec<Endpoint>,
}

impl ServicePort {
    /// A port reached on its cluster IP only: no NodePort, external IPs or session affinity, and
    /// both traffic policies Cluster.
    pub fn plain(
        name: ServicePortName,
        cluster_ip: Ipv4Addr,
        port: u16,
        endpoints: Vec<Endpoint>,
    ) -> ServicePort {
        ServicePort {
            name,
            cluster_ip,
            port,
            node_port: None,
            external_ips: Vec::new(),
            affinity_timeout: None,
            internal_local: false,
            external_local: false,
            endpoints,
        }
    }

    /// Ready endpoints, or when there are none the serving-but-terminating ones
    /// (kube-proxy's fallback so that draining pods still answer).
    fn usable<'a>(eps: impl Iterator<Item = &'a Endpoint> + Clone) -> Vec<&'a Endpoint> {
        let ready: Vec<_> = eps.clone().filter(|e| e.ready).collect();
        if !ready.is_empty() {
            return ready;
        }
        eps.filter(|e| e.serving_terminating()).collect()
    }

    /// Endpoints usable from anywhere in the cluster.
    pub fn cluster_endpoints(&self) -> Vec<&Endpoint> {
        Self::usable(self.endpoints.iter())
    }

    /// Endpoints on this node.
    pub fn local_endpoints(&self) -> Vec<&Endpoint> {
        Self::usable(self.endpoints.iter().filter(|e| e.local))
    }

    /// Endpoints for traffic to the cluster IP.
    pub fn internal_endpoints(&self) -> Vec<&Endpoint> {
        if self.internal_local {
            self.local_endpoints()
        } else {
            self.cluster_endpoints()
        }
    }

    /// Endpoints for traffic to a NodePort or external IP.
    pub fn external_endpoints(&self) -> Vec<&Endpoint> {
        if self.external_local {
            self.local_endpoints()
        } else {
            self.cluster_endpoints()
        }
    }

    /// Whether any endpoint anywhere can serve; if not, connections are rejected at once.
    pub fn has_endpoints(&self) -> bool {
        !self.cluster_endpoints().is_empty()
    }

    /// Whether the port is reachable from outside the cluster network.
    pub fn is_external(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }

    /// Every endpoint that some rule may send traffic to.
    pub fn used_endpoints(&self) -> Vec<&Endpoint> {
        let mut all = self.internal_endpoints();
        if self.is_external() {
            all.extend(self.external_endpoints());
        }
        all.sort();
        all.dedup();
        all
    }
}

/// The full input of one sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyModel {
    pub node_name: String,
    /// The node's own IPv4 addresses (InternalIP/ExternalIP), for NodePort affinity keys.
    pub node_ips: Vec<Ipv4Addr>,
    pub services: BTreeMap<ServicePortName, ServicePort>,
}

impl ProxyModel {
    /// Names of service ports that differ between `self` (the old model) and `new`, sorted.
    /// Both maps are walked side by side (one pass, no lookups): this runs on every sync.
    pub fn changed_services(&self, new: &ProxyModel) -> Vec<ServicePortName> {
        let mut changed = Vec::new();
        let mut old_it = self.services.iter().peekable();
        let mut new_it = new.services.iter().peekable();
        loop {
            match (old_it.peek(), new_it.peek()) {
                (None, None) => break,
                (Some((k, _)), None) => {
                    changed.push((*k).clone());
                    old_it.next();
                }
                (None, Some((k, _))) => {
                    changed.push((*k).clone());
                    new_it.next();
                }
                (Some((ko, vo)), Some((kn, vn))) => match ko.cmp(kn) {
                    std::cmp::Ordering::Less => {
                        changed.push((*ko).clone());
                        old_it.next();
                    }
                    std::cmp::Ordering::Greater => {
                        changed.push((*kn).clone());
                        new_it.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if vo != vn {
                            changed.push((*kn).clone());
                        }
                        old_it.next();
                        new_it.next();
                    }
                },
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint 10.244.0.<n>:8080 with (ready, serving, terminating) and locality.
    fn ep(n: u8, (ready, serving, terminating): (bool, bool, bool), local: bool) -> Endpoint {
        Endpoint {
            ip: Ipv4Addr::new(10, 244, 0, n),
            port: 8080,
            ready,
            serving,
            terminating,
            local,
        }
    }

    const READY: (bool, bool, bool) = (true, true, false);
    const DRAINING: (bool, bool, bool) = (false, true, true);
    const STOPPED: (bool, bool, bool) = (false, false, true);
    const UNREADY: (bool, bool, bool) = (false, false, false);

    fn port(endpoints: Vec<Endpoint>) -> ServicePort {
        let name = ServicePortName {
            namespace: "default".into(),
            name: "web".into(),
            port_name: String::new(),
            protocol: Protocol::Tcp,
        };
        ServicePort::plain(name, Ipv4Addr::new(10, 96, 0, 10), 80, endpoints)
    }

    fn last_octets(eps: Vec<&Endpoint>) -> Vec<u8> {
        eps.iter().map(|e| e.ip.octets()[3]).collect()
    }

    #[test]
    fn terminating_endpoints_get_no_new_connections_while_any_is_ready() {
        // A rolling update: pod 1 is draining, pod 2 is ready, pod 3 not ready yet.
        let sp = port(vec![
            ep(1, DRAINING, true),
            ep(2, READY, true),
            ep(3, UNREADY, true),
        ]);
        assert_eq!(last_octets(sp.cluster_endpoints()), [2]);
        assert_eq!(last_octets(sp.used_endpoints()), [2]);
    }

    #[test]
    fn without_ready_endpoints_the_serving_terminating_ones_answer() {
        // The last replica is deleted: it still answers until it stops serving.
        let sp = port(vec![
            ep(1, DRAINING, false),
            ep(2, STOPPED, false),
            ep(3, UNREADY, false),
        ]);
        assert_eq!(last_octets(sp.cluster_endpoints()), [1]);
        assert!(sp.has_endpoints());
        // Once it stops serving, nothing is left: connections are rejected.
        let sp = port(vec![ep(2, STOPPED, false), ep(3, UNREADY, false)]);
        assert!(sp.cluster_endpoints().is_empty());
        assert!(!sp.has_endpoints());
    }

    #[test]
    fn local_policy_falls_back_to_local_terminating_endpoints() {
        // Ready only on another node; this node's pod is draining: Local traffic stays on this
        // node (kube-proxy's choice), Cluster traffic goes to the ready one.
        let mut sp = port(vec![ep(1, DRAINING, true), ep(2, READY, false)]);
        sp.internal_local = true;
        assert_eq!(last_octets(sp.internal_endpoints()), [1]);
        assert_eq!(last_octets(sp.cluster_endpoints()), [2]);
        // With a ready local endpoint too, the draining one gets nothing new.
        sp.endpoints.push(ep(3, READY, true));
        assert_eq!(last_octets(sp.internal_endpoints()), [3]);
    }
}
