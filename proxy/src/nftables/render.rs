//! Pure rendering for the nftables backend: the per-service map and set elements, and the
//! shared names and types (the fixed table skeleton is in `skeleton.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::net::Ipv4Addr;

use crate::cidr::Ipv4Cidr;
use crate::model::{Endpoint, ProxyModel, ServicePort};

pub const FAMILY_TABLE: &str = "ip keelson";
/// The masquerade bit. Only this bit of the packet mark is ever set or cleared (OR/XOR), so
/// other users of the mark keep theirs; the random bucket is drawn inline by `numgen` inside the
/// map key and never parked in the mark.
pub const MASQ_MARK: &str = "0x4000";
/// Bucket counts: exact up to 16 endpoints (an even spread); above that a power of two at least
/// twice the endpoint count keeps the skew under 2:1 with a bounded number of chains.
pub const BUCKET_CLASSES: [u32; 24] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
];
/// Dynamic affinity entries kept at most (clients x services); older entries are evicted by timeout.
pub const AFFINITY_SIZE: u32 = 262_144;

/// Names of the sets and maps that carry per-service elements.
pub const ELEMENT_SETS: [&str; 18] = [
    "service_buckets",
    "nodeport_buckets",
    "endpoints",
    "nodeport_endpoints",
    "ext_cluster_buckets",
    "ext_cluster_endpoints",
    "nodeport_cluster_buckets",
    "nodeport_cluster_endpoints",
    "ext_local_dsts",
    "ext_local_nodeports",
    "cluster_ips",
    "masq_dsts",
    "masq_nodeports",
    "reject_dsts",
    "drop_dsts",
    "reject_nodeports",
    "drop_nodeports",
    "hairpin",
];

/// Options that change the rendered text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub cluster_cidr: Option<Ipv4Cidr>,
}

/// A set or map that holds per-service elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetName {
    Fixed(&'static str),
    /// Destinations whose clients stick to one endpoint for this many seconds.
    Affinity(u32),
}

impl std::fmt::Display for SetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetName::Fixed(name) => f.write_str(name),
            SetName::Affinity(t) => write!(f, "affinity_{t}"),
        }
    }
}

/// One element of a set or map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Elem {
    pub set: SetName,
    pub key: String,
    pub value: Option<String>,
}

impl Elem {
    fn new(set: &'static str, key: String) -> Elem {
        Elem {
            set: SetName::Fixed(set),
            key,
            value: None,
        }
    }

    fn map(set: &'static str, key: String, value: String) -> Elem {
        Elem {
            set: SetName::Fixed(set),
            key,
            value: Some(value),
        }
    }
}

/// The smallest bucket class that spreads `n` endpoints well.
pub fn bucket_class(n: usize) -> u32 {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    BUCKET_CLASSES
        .iter()
        .copied()
        .find(|c| {
            if n <= 16 {
                *c == n
            } else {
                *c >= n.saturating_mul(2)
            }
        })
        .unwrap_or(4096)
}

fn ep_value(ep: &Endpoint) -> String {
    format!("{} . {}", ep.ip, ep.port)
}

/// A bucket-class dispatch: the vmap that picks `<chain>_N` and the map of endpoints per bucket.
#[derive(Debug, Clone, Copy)]
pub struct Dispatch {
    pub buckets: &'static str,
    pub endpoints: &'static str,
    pub chain: &'static str,
    /// The packet fields of the key: "ip daddr . meta l4proto . th dport" or without the address.
    pub key: &'static str,
}

pub const DST_KEY: &str = "ip daddr . meta l4proto . th dport";
pub const PORT_KEY: &str = "meta l4proto . th dport";

/// Cluster IPs and external IPs.
pub const SERVICE: Dispatch = Dispatch {
    buckets: "service_buckets",
    endpoints: "endpoints",
    chain: "bucket",
    key: DST_KEY,
};
/// A dispatch whose maps and chains are named after `prefix`: `<prefix>_buckets`,
/// `<prefix>_endpoints` and `<prefix>_bucket_N`.
macro_rules! dispatch {
    ($prefix:literal, $key:expr) => {
        Dispatch {
            buckets: concat!($prefix, "_buckets"),
            endpoints: concat!($prefix, "_endpoints"),
            chain: concat!($prefix, "_bucket"),
            key: $key,
        }
    };
}
/// NodePorts.
pub const NODEPORT: Dispatch = dispatch!("nodeport", PORT_KEY);
/// External IPs of externalTrafficPolicy Local services, for pods and the node itself, which
/// go to every endpoint like kube-proxy does.
pub const EXT_CLUSTER: Dispatch = dispatch!("ext_cluster", DST_KEY);
/// The same for NodePorts.
pub const NODEPORT_CLUSTER: Dispatch = dispatch!("nodeport_cluster", PORT_KEY);
pub const DISPATCHES: [Dispatch; 4] = [SERVICE, NODEPORT, EXT_CLUSTER, NODEPORT_CLUSTER];

/// Elements that send one destination ("ip . proto . port" or "proto . port") to `eps`.
fn dnat_elems(d: Dispatch, dst: &str, eps: &[&Endpoint], out: &mut Vec<Elem>) {
    let class = bucket_class(eps.len());
    out.push(Elem::map(
        d.buckets,
        dst.to_string(),
        format!("goto {}_{class}", d.chain),
    ));
    // Buckets take the endpoints round-robin.
    for (b, ep) in (0..class).zip(eps.iter().cycle()) {
        out.push(Elem::map(d.endpoints, format!("{dst} . {b}"), ep_value(ep)));
    }
}

/// Every element one service port contributes. `node_ips` name the NodePort destinations for
/// session affinity, which is keyed by the address the client used.
pub fn service_elements(
    sp: &ServicePort,
    node_ips: &[Ipv4Addr],
    opts: &RenderOptions,
) -> Vec<Elem> {
    let mut out = Vec::new();
    let proto = sp.name.protocol.lower();
    let cluster_dst = format!("{} . {proto} . {}", sp.cluster_ip, sp.port);
    let external_dsts: Vec<String> = sp
        .external_ips
        .iter()
        .map(|ip| format!("{ip} . {proto} . {}", sp.port))
        .collect();
    let nodeport_dst = sp.node_port.map(|np| format!("{proto} . {np}"));
    let has_any = sp.has_endpoints();
    let (reject_dsts, reject_np) = if has_any {
        ("drop_dsts", "drop_nodeports")
    } else {
        ("reject_dsts", "reject_nodeports")
    };

    let internal = sp.internal_endpoints();
    if internal.is_empty() {
        out.push(Elem::new(reject_dsts, cluster_dst.clone()));
    } else {
        dnat_elems(SERVICE, &cluster_dst, &internal, &mut out);
        if opts.cluster_cidr.is_some() {
            out.push(Elem::new("cluster_ips", cluster_dst.clone()));
        }
    }

    let external = sp.external_endpoints();
    for dst in &external_dsts {
        if external.is_empty() {
            out.push(Elem::new(reject_dsts, dst.clone()));
            continue;
        }
        dnat_elems(SERVICE, dst, &external, &mut out);
        if !sp.external_local {
            out.push(Elem::new("masq_dsts", dst.clone()));
        }
    }
    if let Some(dst) = &nodeport_dst {
        if external.is_empty() {
            out.push(Elem::new(reject_np, dst.clone()));
        } else {
            dnat_elems(NODEPORT, dst, &external, &mut out);
            if !sp.external_local {
                out.push(Elem::new("masq_nodeports", dst.clone()));
            }
        }
    }

    ext_cluster_elems(sp, &external_dsts, nodeport_dst.as_deref(), &mut out);
    if let Some(t) = sp.affinity_timeout {
        affinity_elems(t, sp, node_ips, cluster_dst, external_dsts, &mut out);
    }
    out
}

/// externalTrafficPolicy Local: pods and the node itself still reach every endpoint.
fn ext_cluster_elems(
    sp: &ServicePort,
    external_dsts: &[String],
    nodeport_dst: Option<&str>,
    out: &mut Vec<Elem>,
) {
    if !sp.external_local {
        return;
    }
    let cluster = sp.cluster_endpoints();
    if cluster.is_empty() {
        return;
    }
    for dst in external_dsts {
        dnat_elems(EXT_CLUSTER, dst, &cluster, out);
        out.push(Elem::new("ext_local_dsts", dst.clone()));
    }
    if let Some(dst) = nodeport_dst {
        dnat_elems(NODEPORT_CLUSTER, dst, &cluster, out);
        out.push(Elem::new("ext_local_nodeports", dst.to_string()));
    }
}

/// Session affinity: every destination a client may have dialled (cluster IP, external IPs,
/// the node's addresses at the NodePort) is a member of the affinity set of its timeout.
fn affinity_elems(
    timeout: u32,
    sp: &ServicePort,
    node_ips: &[Ipv4Addr],
    cluster_dst: String,
    external_dsts: Vec<String>,
    out: &mut Vec<Elem>,
) {
    let set = affinity_set_name(timeout);
    let proto = sp.name.protocol.lower();
    let node_port_dsts = sp.node_port.into_iter().flat_map(|np| {
        node_ips
            .iter()
            .map(move |ip| format!("{ip} . {proto} . {np}"))
    });
    let dsts = std::iter::once(cluster_dst)
        .chain(external_dsts)
        .chain(node_port_dsts);
    out.extend(dsts.map(|key| Elem {
        set,
        key,
        value: None,
    }));
}

/// Pod IPs that may reach themselves through this service port (hairpin masquerade).
/// Kept apart from `service_elements` because one pod can back many services.
pub fn hairpin_ips(sp: &ServicePort) -> Vec<Ipv4Addr> {
    let mut ips: Vec<Ipv4Addr> = sp.used_endpoints().iter().map(|e| e.ip).collect();
    if sp.external_local && sp.is_external() {
        ips.extend(sp.cluster_endpoints().iter().map(|e| e.ip));
    }
    ips.sort();
    ips.dedup();
    ips
}

/// The hairpin set element of one pod IP.
pub fn hairpin_elem(ip: Ipv4Addr) -> Elem {
    Elem::new("hairpin", format!("{ip} . {ip}"))
}

/// The affinity membership set for one timeout; one set per distinct timeout value.
pub fn affinity_set_name(timeout: u32) -> SetName {
    SetName::Affinity(timeout)
}

/// Distinct affinity timeouts in the model.
pub fn affinity_timeouts(model: &ProxyModel) -> BTreeSet<u32> {
    model
        .services
        .values()
        .filter_map(|s| s.affinity_timeout)
        .collect()
}

/// Elements grouped by set, first writer of a key wins (two Services claiming one
/// destination would otherwise make the whole transaction fail).
pub fn merge_elements<'a>(
    all: impl Iterator<Item = &'a Elem>,
) -> BTreeMap<SetName, BTreeMap<&'a str, Option<&'a str>>> {
    let mut out: BTreeMap<SetName, BTreeMap<&str, Option<&str>>> = BTreeMap::new();
    for e in all {
        out.entry(e.set)
            .or_default()
            .entry(e.key.as_str())
            .or_insert(e.value.as_deref());
    }
    out
}

/// Elements per line in `add element` commands: keeps single lines reasonable for nft's parser.
const CHUNK: usize = 1000;

/// `add element` commands for grouped elements.
pub fn add_elements_text(
    grouped: &BTreeMap<SetName, BTreeMap<&str, Option<&str>>>,
    out: &mut String,
) -> usize {
    let mut count = 0;
    for (set, elems) in grouped {
        let items: Vec<String> = elems
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k} : {v}"),
                None => k.to_string(),
            })
            .collect();
        count += items.len();
        for chunk in items.chunks(CHUNK) {
            let _ = writeln!(
                out,
                "add element {FAMILY_TABLE} {set} {{ {} }}",
                chunk.join(", ")
            );
        }
    }
    count
}

/// `add element` commands for a stream of elements, written without collecting them first (a
/// full sync at 10,000 services has ~100,000 elements). The first writer of a key wins; keys are
/// remembered by hash only.
pub fn stream_add_elements(elems: impl Iterator<Item = Elem>, out: &mut String) -> usize {
    use std::hash::{Hash, Hasher};
    let mut seen: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut bufs: BTreeMap<SetName, (String, usize)> = BTreeMap::new();
    for e in elems {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (e.set, &e.key).hash(&mut h);
        if !seen.insert(h.finish()) {
            continue;
        }
        let (buf, n) = bufs.entry(e.set).or_default();
        if *n % CHUNK == 0 {
            if *n > 0 {
                buf.push_str(" }\n");
            }
            let _ = write!(buf, "add element {FAMILY_TABLE} {} {{ ", e.set);
        } else {
            buf.push_str(", ");
        }
        buf.push_str(&e.key);
        if let Some(v) = &e.value {
            buf.push_str(" : ");
            buf.push_str(v);
        }
        *n += 1;
    }
    let mut total = 0;
    for (_, (buf, n)) in bufs {
        out.push_str(&buf);
        out.push_str(" }\n");
        total += n;
    }
    total
}

/// `delete element` commands (keys only).
pub fn delete_elements_text(elems: &[&Elem], out: &mut String) {
    let mut by_set: BTreeMap<SetName, Vec<&str>> = BTreeMap::new();
    for e in elems {
        by_set.entry(e.set).or_default().push(&e.key);
    }
    for (set, keys) in by_set {
        for chunk in keys.chunks(CHUNK) {
            let _ = writeln!(
                out,
                "delete element {FAMILY_TABLE} {set} {{ {} }}",
                chunk.join(", ")
            );
        }
    }
}
