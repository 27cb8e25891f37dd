//! The fixed part of the nftables table: sets, maps, chains and rules whose number does not
//! depend on the number of Services (only on the options and the distinct affinity timeouts).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::render::{
    affinity_set_name, Dispatch, RenderOptions, AFFINITY_SIZE, BUCKET_CLASSES, DISPATCHES, DST_KEY,
    ELEMENT_SETS, EXT_CLUSTER, FAMILY_TABLE, MASQ_MARK, NODEPORT_CLUSTER, PORT_KEY,
};

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
    let set_masq = format!("meta mark set meta mark | {MASQ_MARK}");
    dispatch_rules(opts, &set_masq, out);
    bucket_rules(out);
    postrouting_rules(timeouts, &set_masq, out);
    reject_rules(out);
}

/// Appends `add rule <table> <chain> <body>`.
fn add_rule(out: &mut String, chain: &str, body: &str) {
    let _ = writeln!(out, "add rule {FAMILY_TABLE} {chain} {body}");
}

/// From the nat hooks to the bucket maps: masquerade marks, affinity, the Local short cuts.
fn dispatch_rules(opts: &RenderOptions, set_masq: &str, out: &mut String) {
    let dst = DST_KEY;
    let mut rule = |chain: &str, body: &str| add_rule(out, chain, body);
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
        set_masq,
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
        set_masq,
    );
    rule(
        "nodeports",
        "meta l4proto . th dport vmap @nodeport_buckets",
    );
}

/// One rule per bucket chain: the endpoint drawn at random inside the map key.
fn bucket_rules(out: &mut String) {
    // nft 1.0.6 gives the first rule that uses a map typed "... : ip daddr . tcp dport" a
    // spurious "meta l4proto tcp" match (which would break UDP). These rules take that hit in
    // a chain nothing jumps to, so the bucket rules below are compiled as written.
    for d in DISPATCHES {
        add_rule(
            out,
            "typeof_anchor",
            &format!(
                "dnat ip to {} . numgen random mod 1 map @{}",
                d.key, d.endpoints
            ),
        );
    }
    for d in DISPATCHES {
        for class in BUCKET_CLASSES {
            add_rule(
                out,
                &format!("{}_{class}", d.chain),
                &format!(
                    "dnat ip to {} . numgen random mod {class} map @{}",
                    d.key, d.endpoints
                ),
            );
        }
    }
}

/// Affinity learning, hairpin and the masquerade itself.
fn postrouting_rules(timeouts: &BTreeSet<u32>, set_masq: &str, out: &mut String) {
    // Remember the endpoint a client got, keyed by the address it dialled; refreshed per connection.
    for timeout in timeouts {
        let set = affinity_set_name(*timeout);
        for proto in ["tcp", "udp", "sctp"] {
            add_rule(out, "nat_postrouting", &format!(
                "meta l4proto {proto} ct status dnat ct original ip daddr . meta l4proto . ct original proto-dst @{set} update @affinity {{ ip saddr . ct original ip daddr . meta l4proto . ct original proto-dst timeout {timeout}s : ip daddr . th dport }}"
            ));
        }
    }
    // A pod reaching itself through its Service: the reply must come back through this node.
    add_rule(
        out,
        "nat_postrouting",
        &format!("ip saddr . ip daddr @hairpin {set_masq}"),
    );
    add_rule(out, "nat_postrouting", &format!(
        "meta mark & {MASQ_MARK} == {MASQ_MARK} meta mark set meta mark ^ {MASQ_MARK} masquerade fully-random"
    ));
}

/// Services without (local) endpoints: refused or dropped in the filter hooks.
fn reject_rules(out: &mut String) {
    let dst = DST_KEY;
    let mut rule = |chain: &str, body: &str| add_rule(out, chain, body);
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
