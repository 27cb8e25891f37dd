//! The cluster's DNS zone as the Kubernetes DNS specification (and CoreDNS's kubernetes plugin)
//! defines it, built from compact records of Services and EndpointSlices. Pure: no I/O, no wire
//! format; `wire` turns an `Answer` into a DNS message.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A Service as DNS sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEntry {
    pub namespace: String,
    pub name: String,
    pub kind: ServiceKind,
    pub ports: Vec<PortEntry>,
    /// spec.publishNotReadyAddresses: not-ready endpoints are published too.
    pub publish_not_ready: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// Names resolve to the ClusterIP(s).
    ClusterIp(Vec<IpAddr>),
    /// clusterIP None: names resolve to the ready endpoints.
    Headless,
    /// A CNAME to spec.externalName.
    ExternalName(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortEntry {
    /// The port's name, lowercase ("" when unnamed: no `_name._proto` SRV name then).
    pub name: String,
    /// "tcp", "udp" or "sctp".
    pub protocol: String,
    pub port: u16,
}

/// One address of an EndpointSlice, with the slice's ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointEntry {
    pub ip: IpAddr,
    pub hostname: Option<String>,
    pub ready: bool,
    pub ports: Vec<PortEntry>,
}

/// The endpoints of one slice and the Service they belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceEntry {
    pub namespace: String,
    pub service: String,
    pub endpoints: Vec<EndpointEntry>,
}

/// One record's data; its owner is the query name unless said otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rr {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
    Ptr(String),
    Cname(String),
    Ns(String),
    Soa,
}

/// What the zone says about a (name, type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// NOERROR with these answers; `additional` holds (owner, record) pairs (SRV targets' addresses).
    Records {
        answers: Vec<Rr>,
        additional: Vec<(String, Rr)>,
    },
    /// The name exists but has no record of that type: NOERROR, the SOA in authority.
    NoData,
    /// The name does not exist: NXDOMAIN, the SOA in authority.
    NxDomain,
    /// Not a name this server is authoritative for (REFUSED, or forwarded upstream).
    NotOurs,
}

/// The query types the zone distinguishes; every other type gets NODATA on an existing name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QType {
    A,
    Aaaa,
    Srv,
    Ptr,
    Soa,
    Ns,
    Other,
}

/// The SOA's fixed fields, as CoreDNS's kubernetes plugin writes them.
pub const SOA_REFRESH: i32 = 7200;
pub const SOA_RETRY: i32 = 1800;
pub const SOA_EXPIRE: i32 = 86400;

struct Svc {
    entry: ServiceEntry,
    /// Published endpoints (ready, or all with publishNotReadyAddresses).
    endpoints: Vec<EndpointEntry>,
}

pub struct Zone {
    /// The cluster domain, lowercase, without the trailing dot ("cluster.local").
    domain: String,
    services: HashMap<(String, String), Svc>,
    namespaces: HashSet<String>,
    ptr: HashMap<IpAddr, String>,
    /// The SOA serial: changes whenever the zone is rebuilt from changed objects.
    pub serial: u32,
}

impl Zone {
    pub fn build(
        domain: &str,
        services: Vec<ServiceEntry>,
        slices: Vec<SliceEntry>,
        serial: u32,
    ) -> Zone {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let mut zone = Zone {
            domain,
            services: HashMap::new(),
            namespaces: HashSet::new(),
            ptr: HashMap::new(),
            serial,
        };
        for entry in services {
            zone.namespaces.insert(entry.namespace.clone());
            let key = (entry.namespace.clone(), entry.name.clone());
            let svc = Svc {
                entry,
                endpoints: Vec::new(),
            };
            zone.services.insert(key, svc);
        }
        for slice in slices {
            let key = (slice.namespace, slice.service);
            if let Some(svc) = zone.services.get_mut(&key) {
                let publish_all = svc.entry.publish_not_ready;
                let eps = slice
                    .endpoints
                    .into_iter()
                    .filter(|e| e.ready || publish_all);
                svc.endpoints.extend(eps);
            }
        }
        zone.index_ptr();
        zone
    }

    /// PTR names: a ClusterIP names its Service, a headless Service's endpoint names itself.
    fn index_ptr(&mut self) {
        for ((ns, name), svc) in &self.services {
            let fqdn = self.service_fqdn(ns, name);
            match &svc.entry.kind {
                ServiceKind::ClusterIp(ips) => {
                    for ip in ips {
                        self.ptr.insert(*ip, fqdn.clone());
                    }
                }
                ServiceKind::Headless => {
                    for ep in &svc.endpoints {
                        let host = endpoint_label(ep);
                        self.ptr.insert(ep.ip, format!("{host}.{fqdn}"));
                    }
                }
                ServiceKind::ExternalName(_) => {}
            }
        }
    }

    pub fn service_count(&self) -> usize {
        self.services.len()
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// `ns.dns.<domain>`: the primary name server in the SOA and the apex NS record.
    pub fn ns_name(&self) -> String {
        format!("ns.dns.{}.", self.domain)
    }

    /// `hostmaster.<domain>`: the SOA's mailbox.
    pub fn hostmaster(&self) -> String {
        format!("hostmaster.{}.", self.domain)
    }

    /// The zone apex with its trailing dot (the SOA's owner).
    pub fn apex(&self) -> String {
        format!("{}.", self.domain)
    }

    fn service_fqdn(&self, ns: &str, name: &str) -> String {
        format!("{name}.{ns}.svc.{}.", self.domain)
    }

    /// Answers a question; `name` is case-insensitive, with or without its trailing dot.
    pub fn lookup(&self, name: &str, qtype: QType) -> Answer {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(ip) = crate::reverse::parse_reverse_name(&name) {
            return self.lookup_ptr(ip, qtype);
        }
        let rest = if name == self.domain {
            ""
        } else if let Some(r) = name.strip_suffix(&format!(".{}", self.domain)) {
            r
        } else {
            return Answer::NotOurs;
        };
        // Labels right to left, below the domain.
        let labels: Vec<&str> = if rest.is_empty() {
            Vec::new()
        } else {
            rest.rsplit('.').collect()
        };
        match labels.as_slice() {
            [] => self.apex_answer(qtype),
            ["svc"] | ["pod"] => Answer::NoData,
            ["svc", ns] => self.namespace_answer(ns),
            ["pod", ns] => self.namespace_answer(ns),
            ["svc", ns, svc] => self.service_answer(ns, svc, qtype),
            ["svc", ns, svc, host] => self.endpoint_answer(ns, svc, host, qtype),
            ["svc", ns, svc, proto, port] => self.srv_answer(ns, svc, proto, port, qtype),
            ["pod", _ns, dashed] => pod_answer(dashed, qtype),
            _ => Answer::NxDomain,
        }
    }

    fn apex_answer(&self, qtype: QType) -> Answer {
        match qtype {
            QType::Soa => records(vec![Rr::Soa]),
            QType::Ns => records(vec![Rr::Ns(self.ns_name())]),
            _ => Answer::NoData,
        }
    }

    fn namespace_answer(&self, ns: &str) -> Answer {
        if self.namespaces.contains(ns) {
            Answer::NoData
        } else {
            Answer::NxDomain
        }
    }

    fn lookup_ptr(&self, ip: IpAddr, qtype: QType) -> Answer {
        match (self.ptr.get(&ip), qtype) {
            (None, _) => Answer::NotOurs,
            (Some(target), QType::Ptr) => records(vec![Rr::Ptr(target.clone())]),
            (Some(_), _) => Answer::NoData,
        }
    }

    fn service(&self, ns: &str, name: &str) -> Option<&Svc> {
        self.services.get(&(ns.to_string(), name.to_string()))
    }

    fn service_answer(&self, ns: &str, name: &str, qtype: QType) -> Answer {
        let Some(svc) = self.service(ns, name) else {
            return Answer::NxDomain;
        };
        match (&svc.entry.kind, qtype) {
            (ServiceKind::ExternalName(target), _) => records(vec![Rr::Cname(format!(
                "{}.",
                target.trim_end_matches('.')
            ))]),
            (ServiceKind::ClusterIp(ips), QType::A | QType::Aaaa) => {
                addresses(ips.iter().copied(), qtype)
            }
            (ServiceKind::Headless, QType::A | QType::Aaaa) => {
                addresses(svc.endpoints.iter().map(|e| e.ip), qtype)
            }
            (_, QType::Srv) => self.srv_records(ns, name, svc, |_| true),
            _ => Answer::NoData,
        }
    }

    fn endpoint_answer(&self, ns: &str, name: &str, host: &str, qtype: QType) -> Answer {
        let Some(svc) = self.service(ns, name) else {
            return Answer::NxDomain;
        };
        if svc.entry.kind != ServiceKind::Headless {
            return Answer::NxDomain;
        }
        let ips: Vec<IpAddr> = svc
            .endpoints
            .iter()
            .filter(|e| endpoint_label(e) == host)
            .map(|e| e.ip)
            .collect();
        if ips.is_empty() {
            return Answer::NxDomain;
        }
        match qtype {
            QType::A | QType::Aaaa => addresses(ips.into_iter(), qtype),
            _ => Answer::NoData,
        }
    }

    fn srv_answer(&self, ns: &str, name: &str, proto: &str, port: &str, qtype: QType) -> Answer {
        let (Some(proto), Some(port)) = (proto.strip_prefix('_'), port.strip_prefix('_')) else {
            return Answer::NxDomain;
        };
        let Some(svc) = self.service(ns, name) else {
            return Answer::NxDomain;
        };
        let named = |p: &PortEntry| !p.name.is_empty() && p.name == port && p.protocol == proto;
        let exists = match svc.entry.kind {
            ServiceKind::Headless => svc.endpoints.iter().any(|e| e.ports.iter().any(named)),
            _ => svc.entry.ports.iter().any(named),
        };
        match (exists, qtype) {
            (false, _) => Answer::NxDomain,
            (true, QType::Srv) => self.srv_records(ns, name, svc, named),
            (true, _) => Answer::NoData,
        }
    }

    /// SRV records of the Service's ports that `keep` selects: to the Service's name for a
    /// ClusterIP Service, to each endpoint's name for a headless one (with their addresses
    /// as additional records). Weights share 100 among the records, as CoreDNS does.
    fn srv_records(
        &self,
        ns: &str,
        name: &str,
        svc: &Svc,
        keep: impl Fn(&PortEntry) -> bool,
    ) -> Answer {
        let fqdn = self.service_fqdn(ns, name);
        let mut targets: Vec<(u16, String, Vec<IpAddr>)> = Vec::new();
        match &svc.entry.kind {
            ServiceKind::ClusterIp(ips) => {
                for p in svc.entry.ports.iter().filter(|p| keep(p)) {
                    targets.push((p.port, fqdn.clone(), ips.clone()));
                }
            }
            ServiceKind::Headless => {
                for ep in &svc.endpoints {
                    let target = format!("{}.{fqdn}", endpoint_label(ep));
                    for p in ep.ports.iter().filter(|p| keep(p)) {
                        targets.push((p.port, target.clone(), vec![ep.ip]));
                    }
                }
            }
            ServiceKind::ExternalName(_) => return Answer::NoData,
        }
        if targets.is_empty() {
            return Answer::NoData;
        }
        let weight = u16::try_from(100 / targets.len()).unwrap_or(1).max(1);
        let mut answers = Vec::new();
        let mut additional = Vec::new();
        for (port, target, ips) in targets {
            for ip in ips {
                let rr = address_rr(ip);
                if !additional.contains(&(target.clone(), rr.clone())) {
                    additional.push((target.clone(), rr));
                }
            }
            answers.push(Rr::Srv {
                priority: 0,
                weight,
                port,
                target,
            });
        }
        Answer::Records {
            answers,
            additional,
        }
    }
}

/// The label naming an endpoint: its hostname, or its address with dashes (10-0-0-1).
fn endpoint_label(ep: &EndpointEntry) -> String {
    match &ep.hostname {
        Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
        _ => dashed(ep.ip),
    }
}

/// 10.0.0.1 -> 10-0-0-1; 2001:db8::1 -> 2001-db8--1 (the Kubernetes DNS spec's form).
pub fn dashed(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

/// `a-b-c-d.ns.pod.<domain>`: the address in the name, as CoreDNS's `pods insecure` (the
/// kubeadm default) answers without looking the pod up.
fn pod_answer(label: &str, qtype: QType) -> Answer {
    let v4 = label
        .replace('-', ".")
        .parse::<Ipv4Addr>()
        .ok()
        .map(IpAddr::V4);
    let ip = v4.or_else(|| {
        if label.contains("--") || label.matches('-').count() == 7 {
            label
                .replace('-', ":")
                .parse::<Ipv6Addr>()
                .ok()
                .map(IpAddr::V6)
        } else {
            None
        }
    });
    match ip {
        None => Answer::NxDomain,
        Some(ip) => match qtype {
            QType::A | QType::Aaaa => addresses(std::iter::once(ip), qtype),
            _ => Answer::NoData,
        },
    }
}

fn address_rr(ip: IpAddr) -> Rr {
    match ip {
        IpAddr::V4(v4) => Rr::A(v4),
        IpAddr::V6(v6) => Rr::Aaaa(v6),
    }
}

/// The addresses of the asked family; none of it is NODATA (the name exists).
fn addresses(ips: impl Iterator<Item = IpAddr>, qtype: QType) -> Answer {
    let want_v4 = qtype == QType::A;
    let mut rrs: Vec<Rr> = Vec::new();
    for ip in ips.filter(|ip| ip.is_ipv4() == want_v4) {
        let rr = address_rr(ip);
        if !rrs.contains(&rr) {
            rrs.push(rr);
        }
    }
    if rrs.is_empty() {
        Answer::NoData
    } else {
        records(rrs)
    }
}

fn records(answers: Vec<Rr>) -> Answer {
    Answer::Records {
        answers,
        additional: Vec::new(),
    }
}
