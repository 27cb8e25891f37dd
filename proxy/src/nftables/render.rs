//! Pure rendering for the nftables backend: a fixed table skeleton (chains and rules that do not
//! depend on the number of Services) plus per-service map and set elements.

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

    /// "key" or "key : value" as written inside `{ }`.
    pub fn text(&self) -> String {
        match &self.value {
            Some(v) => format!("{} : {}", self.key, v),
            None => self.key.clone(),
        }
    }
}

/// The smallest bucket class that spreads `n` endpoints well.
pub fn bucket_class(n: usize) -> u32 {
    let n = n as u32;
    BUCKET_CLASSES
        .iter()
        .copied()
        .find(|c| if n <= 16 { *c == n } else { *c >= 2 * n })
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

const DST_KEY: &str = "ip daddr . meta l4proto . th dport";
const PORT_KEY: &str = "meta l4proto . th dport";

/// Cluster IPs and external IPs.
pub const SERVICE: Dispatch = Dispatch {
    buckets: "service_buckets",
    endpoints: "endpoints",
    chain: "bucket",
    key: DST_KEY,
};
/// NodePorts.
pub const NODEPORT: Dispatch = Dispatch {
    buckets: "nodeport_buckets",
    endpoints: "nodeport_endpoints",
    chain: "nodeport_bucket",
    key: PORT_KEY,
};
/// External IPs of externalTrafficPolicy Local services, for pods and the node itself, which
/// go to every endpoint like kube-proxy does.
pub const EXT_CLUSTER: Dispatch = Dispatch {
    buckets: "ext_cluster_buckets",
    endpoints: "ext_cluster_endpoints",
    chain: "ext_cluster_bucket",
    key: DST_KEY,
};
/// The same for NodePorts.
pub const NODEPORT_CLUSTER: Dispatch = Dispatch {
    buckets: "nodeport_cluster_buckets",
    endpoints: "nodeport_cluster_endpoints",
    chain: "nodeport_cluster_bucket",
    key: PORT_KEY,
};
pub const DISPATCHES: [Dispatch; 4] = [SERVICE, NODEPORT, EXT_CLUSTER, NODEPORT_CLUSTER];

/// Elements that send one destination ("ip . proto . port" or "proto . port") to `eps`.
fn dnat_elems(d: Dispatch, dst: &str, eps: &[&Endpoint], out: &mut Vec<Elem>) {
    let class = bucket_class(eps.len());
    out.push(Elem::map(
        d.buckets,
        dst.to_string(),
        format!("goto {}_{class}", d.chain),
    ));
    for b in 0..class {
        let ep = eps[b as usize % eps.len()];
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

    // externalTrafficPolicy Local: pods and the node itself still reach every endpoint.
    let cluster = sp.cluster_endpoints();
    if sp.external_local && !cluster.is_empty() {
        for dst in &external_dsts {
            dnat_elems(EXT_CLUSTER, dst, &cluster, &mut out);
            out.push(Elem::new("ext_local_dsts", dst.clone()));
        }
        if let Some(dst) = &nodeport_dst {
            dnat_elems(NODEPORT_CLUSTER, dst, &cluster, &mut out);
            out.push(Elem::new("ext_local_nodeports", dst.clone()));
        }
    }

    if let Some(t) = sp.affinity_timeout {
        let set = affinity_set_name(t);
        let mut dsts = vec![cluster_dst.clone()];
        dsts.extend(external_dsts.iter().cloned());
        if let Some(np) = sp.node_port {
            dsts.extend(node_ips.iter().map(|ip| format!("{ip} . {proto} . {np}")));
        }
        out.extend(dsts.into_iter().map(|key| Elem {
            set,
            key,
            value: None,
        }));
    }

    out
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

/// Set and map declarations (`add` is idempotent, so this is safe on an existing table).
fn declarations(timeouts: &BTreeSet<u32>, out: &mut String) {
    let t = FAMILY_TABLE;
    let dst = "ipv4_addr . inet_proto . inet_service";
    let port = "inet_proto . inet_service";
    for d in DISPATCHES {
        let (key_type, key_expr) = if d.key == DST_KEY {
            (dst, "ip daddr . meta l4proto . th dport")
        } else {
            (port, "meta l4proto . th dport")
        };
        let _ = writeln!(
            out,
            "add map {t} {} {{ type {key_type} : verdict ; }}",
            d.buckets
        );
        // Data typed as "ip daddr . tcp dport" (also right for UDP): nft 1.0.6 cannot read
        // "ip daddr . th dport" back from the kernel and then refuses every later transaction.
        let _ = writeln!(
            out,
            "add map {t} {} {{ typeof {key_expr} . numgen random mod 1 : ip daddr . tcp dport ; }}",
            d.endpoints
        );
    }
    for set in [
        "cluster_ips",
        "masq_dsts",
        "reject_dsts",
        "drop_dsts",
        "ext_local_dsts",
    ] {
        let _ = writeln!(out, "add set {t} {set} {{ type {dst} ; }}");
    }
    for set in [
        "masq_nodeports",
        "reject_nodeports",
        "drop_nodeports",
        "ext_local_nodeports",
    ] {
        let _ = writeln!(out, "add set {t} {set} {{ type {port} ; }}");
    }
    let _ = writeln!(
        out,
        "add set {t} hairpin {{ type ipv4_addr . ipv4_addr ; }}"
    );
    let _ = writeln!(out, "add set {t} canary {{ type mark ; }}");
    let _ = writeln!(out, "add map {t} affinity {{ type ipv4_addr . {dst} : ipv4_addr . inet_service ; flags dynamic,timeout ; size {AFFINITY_SIZE} ; timeout 3h ; }}");
    for timeout in timeouts {
        let _ = writeln!(
            out,
            "add set {t} {} {{ type {dst} ; }}",
            affinity_set_name(*timeout)
        );
    }
}

/// Chains: the hooks, the dispatch chains and one chain per bucket class (a fixed number).
fn chains(out: &mut String) {
    let t = FAMILY_TABLE;
    for (name, spec) in [
        (
            "nat_prerouting",
            "type nat hook prerouting priority -100 ; policy accept ;",
        ),
        (
            "nat_output",
            "type nat hook output priority -100 ; policy accept ;",
        ),
        (
            "nat_postrouting",
            "type nat hook postrouting priority 100 ; policy accept ;",
        ),
        (
            "filter_input",
            "type filter hook input priority 0 ; policy accept ;",
        ),
        (
            "filter_forward",
            "type filter hook forward priority 0 ; policy accept ;",
        ),
        (
            "filter_output",
            "type filter hook output priority 0 ; policy accept ;",
        ),
    ] {
        let _ = writeln!(out, "add chain {t} {name} {{ {spec} }}");
    }
    for name in [
        "services",
        "nodeports",
        "service_rejects",
        "nodeport_rejects",
        "typeof_anchor",
    ] {
        let _ = writeln!(out, "add chain {t} {name}");
    }
    for d in DISPATCHES {
        for class in BUCKET_CLASSES {
            let _ = writeln!(out, "add chain {t} {}_{class}", d.chain);
        }
    }
}

/// The rules; their number depends only on the options and the distinct affinity timeouts.
fn rules(opts: &RenderOptions, timeouts: &BTreeSet<u32>, out: &mut String) {
    let t = FAMILY_TABLE;
    let dst = "ip daddr . meta l4proto . th dport";
    let set_masq = format!("meta mark set meta mark | {MASQ_MARK}");
    let mut rule = |chain: &str, body: &str| {
        let _ = writeln!(out, "add rule {t} {chain} {body}");
    };
    rule("nat_prerouting", "jump services");
    rule("nat_output", "jump services");
    if let Some(cidr) = opts.cluster_cidr {
        rule(
            "services",
            &format!("{dst} @cluster_ips ip saddr != {cidr} {set_masq}"),
        );
    }
    rule("services", &format!("{dst} @masq_dsts {set_masq}"));
    rule(
        "services",
        &format!("dnat ip to ip saddr . {dst} map @affinity"),
    );
    short_circuit(
        &mut rule,
        opts,
        "services",
        dst,
        "ext_local_dsts",
        EXT_CLUSTER,
        &set_masq,
    );
    rule("services", &format!("{dst} vmap @service_buckets"));
    rule(
        "services",
        "ip daddr != 127.0.0.0/8 fib daddr type local jump nodeports",
    );
    rule(
        "nodeports",
        &format!("meta l4proto . th dport @masq_nodeports {set_masq}"),
    );
    rule(
        "nodeports",
        &format!("dnat ip to ip saddr . {dst} map @affinity"),
    );
    short_circuit(
        &mut rule,
        opts,
        "nodeports",
        PORT_KEY,
        "ext_local_nodeports",
        NODEPORT_CLUSTER,
        &set_masq,
    );
    rule(
        "nodeports",
        "meta l4proto . th dport vmap @nodeport_buckets",
    );
    // nft 1.0.6 gives the first rule that uses a map typed "... : ip daddr . tcp dport" a
    // spurious "meta l4proto tcp" match (which would break UDP). These rules take that hit in
    // a chain nothing jumps to, so the bucket rules below are compiled as written.
    for d in DISPATCHES {
        rule(
            "typeof_anchor",
            &format!(
                "dnat ip to {} . numgen random mod 1 map @{}",
                d.key, d.endpoints
            ),
        );
    }
    for d in DISPATCHES {
        for class in BUCKET_CLASSES {
            rule(
                &format!("{}_{class}", d.chain),
                &format!(
                    "dnat ip to {} . numgen random mod {class} map @{}",
                    d.key, d.endpoints
                ),
            );
        }
    }
    // Remember the endpoint a client got, keyed by the address it dialled; refreshed per connection.
    for timeout in timeouts {
        let set = affinity_set_name(*timeout);
        for proto in ["tcp", "udp", "sctp"] {
            rule("nat_postrouting", &format!(
                "meta l4proto {proto} ct status dnat ct original ip daddr . meta l4proto . ct original proto-dst @{set} update @affinity {{ ip saddr . ct original ip daddr . meta l4proto . ct original proto-dst timeout {timeout}s : ip daddr . th dport }}"
            ));
        }
    }
    // A pod reaching itself through its Service: the reply must come back through this node.
    rule(
        "nat_postrouting",
        &format!("ip saddr . ip daddr @hairpin {set_masq}"),
    );
    rule("nat_postrouting", &format!(
        "meta mark & {MASQ_MARK} == {MASQ_MARK} meta mark set meta mark ^ {MASQ_MARK} masquerade fully-random"
    ));
    rule("filter_input", "ct state new jump service_rejects");
    rule(
        "filter_input",
        "ct state new ip daddr != 127.0.0.0/8 jump nodeport_rejects",
    );
    rule("filter_forward", "ct state new jump service_rejects");
    rule("filter_output", "ct state new jump service_rejects");
    rule("service_rejects", &format!("{dst} @reject_dsts reject"));
    rule("service_rejects", &format!("{dst} @drop_dsts drop"));
    rule(
        "nodeport_rejects",
        "meta l4proto . th dport @reject_nodeports reject",
    );
    rule(
        "nodeport_rejects",
        "meta l4proto . th dport @drop_nodeports drop",
    );
}

/// externalTrafficPolicy Local keeps the client address for outside clients only: pods (the
/// cluster CIDR) and the node itself go to every endpoint, the node's own traffic masqueraded.
fn short_circuit(
    rule: &mut impl FnMut(&str, &str),
    opts: &RenderOptions,
    chain: &str,
    key: &str,
    set: &str,
    d: Dispatch,
    set_masq: &str,
) {
    if let Some(cidr) = opts.cluster_cidr {
        rule(chain, &format!("ip saddr {cidr} {key} vmap @{}", d.buckets));
    }
    rule(
        chain,
        &format!("fib saddr type local {key} @{set} {set_masq}"),
    );
    rule(
        chain,
        &format!("fib saddr type local {key} vmap @{}", d.buckets),
    );
}

/// The start of every full sync: (re)declare the table, empty its chains and element sets (the
/// affinity map keeps its entries), drop affinity sets no longer used, re-add all rules.
pub fn skeleton(
    opts: &RenderOptions,
    timeouts: &BTreeSet<u32>,
    stale_timeouts: &BTreeSet<u32>,
) -> String {
    let t = FAMILY_TABLE;
    let mut out = format!("add table {t}\nflush table {t}\n");
    declarations(timeouts, &mut out);
    for set in ELEMENT_SETS {
        let kind = if is_map(set) { "map" } else { "set" };
        let _ = writeln!(out, "flush {kind} {t} {set}");
    }
    for timeout in timeouts {
        let _ = writeln!(out, "flush set {t} {}", affinity_set_name(*timeout));
    }
    for timeout in stale_timeouts {
        let _ = writeln!(out, "delete set {t} {}", affinity_set_name(*timeout));
    }
    chains(&mut out);
    rules(opts, timeouts, &mut out);
    out.push_str(CANARY_ELEMENT);
    out
}

/// The canary: a one-element set. Checking it is cheap, while listing a chain makes nft 1.0.6
/// fetch every set element of the table (about a second at 10,000 services).
pub const CANARY_ELEMENT: &str =
    "flush set ip keelson canary\nadd element ip keelson canary { 0x1 }\n";

/// The same skeleton after deleting the table: used when the existing table cannot be reused.
pub fn recreate_skeleton(opts: &RenderOptions, timeouts: &BTreeSet<u32>) -> String {
    let t = FAMILY_TABLE;
    let mut out = format!("add table {t}\ndelete table {t}\nadd table {t}\n");
    declarations(timeouts, &mut out);
    chains(&mut out);
    rules(opts, timeouts, &mut out);
    out.push_str(CANARY_ELEMENT);
    out
}

fn is_map(set: &str) -> bool {
    set.ends_with("buckets") || set.ends_with("endpoints") || set == "affinity"
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
