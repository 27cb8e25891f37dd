//! The node's policy table as data, and its rendering as one `nft -f` transaction: the whole
//! table (first sync, after a failure, periodically) or only what changed since the last load
//! (a pod that starts adds one element to the sets naming it; no chain is rewritten).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The nftables table every rule lives in (the inet family sees both routed and, with
/// br_netfilter, bridged pod traffic).
pub const TABLE: &str = "inet keelson-netpol";

/// The base chain: hooked on forward, after the proxy's DNAT in prerouting, so policy sees the
/// pod address a Service connection was sent to. Traffic from and to the node itself goes
/// through the input and output hooks and is never checked, as upstream expects.
pub const FORWARD: &str = "forward";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetKind {
    /// Pod IPs.
    Addr,
    /// Address ranges (ipBlocks).
    Interval,
    /// Pod IP . protocol . port (named ports resolved per pod).
    AddrProtoPort,
}

impl SetKind {
    fn spec(self) -> &'static str {
        match self {
            SetKind::Addr => "type ipv4_addr ;",
            SetKind::Interval => "type ipv4_addr ; flags interval ;",
            SetKind::AddrProtoPort => "type ipv4_addr . inet_proto . inet_service ;",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDef {
    pub kind: SetKind,
    pub elements: BTreeSet<String>,
}

/// A whole table; empty (no chains) means no table at all: a node without policies carries no
/// rules, and removing the last policy removes the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub sets: BTreeMap<String, SetDef>,
    /// Regular chains by name, each its rule bodies in order; the base chain is [`FORWARD`].
    pub chains: BTreeMap<String, Vec<String>>,
}

impl Ruleset {
    pub fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }

    pub fn rule_count(&self) -> usize {
        self.chains.values().map(Vec::len).sum()
    }

    pub fn element_count(&self) -> usize {
        self.sets.values().map(|s| s.elements.len()).sum()
    }
}

fn chain_decl(name: &str) -> String {
    if name == FORWARD {
        format!(
            "add chain {TABLE} {FORWARD} {{ type filter hook forward priority filter ; policy accept ; }}"
        )
    } else {
        format!("add chain {TABLE} {name}")
    }
}

fn elements(out: &mut String, verb: &str, set: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.collect();
    // nft reads one long line fine, but a bounded line keeps error messages readable.
    for chunk in items.chunks(256) {
        let _ = writeln!(
            out,
            "{verb} element {TABLE} {set} {{ {} }}",
            chunk.join(", ")
        );
    }
}

fn rules(out: &mut String, chain: &str, bodies: &[String]) {
    for body in bodies {
        let _ = writeln!(out, "add rule {TABLE} {chain} {body}");
    }
}

/// The whole table in one transaction: created (so the delete cannot fail), deleted and written
/// anew, so the kernel never holds a half-written table.
pub fn render_full(rs: &Ruleset) -> String {
    let mut out = format!("add table {TABLE}\ndelete table {TABLE}\n");
    if rs.is_empty() {
        return out;
    }
    let _ = writeln!(out, "add table {TABLE}");
    for (name, set) in &rs.sets {
        let _ = writeln!(out, "add set {TABLE} {name} {{ {} }}", set.kind.spec());
        elements(&mut out, "add", name, set.elements.iter().cloned());
    }
    for name in rs.chains.keys() {
        let _ = writeln!(out, "{}", chain_decl(name));
    }
    for (name, bodies) in &rs.chains {
        rules(&mut out, name, bodies);
    }
    out
}

/// What turns `old` (loaded) into `new`, or None when they are equal. Chains whose rules changed
/// are flushed and refilled; set elements are added and deleted one by one. A table appearing or
/// disappearing is a full render.
pub fn render_diff(old: &Ruleset, new: &Ruleset) -> Option<String> {
    if old == new {
        return None;
    }
    if old.is_empty() || new.is_empty() {
        return Some(render_full(new));
    }
    let mut out = String::new();
    let changed: Vec<(&String, &Vec<String>)> = new
        .chains
        .iter()
        .filter(|(n, r)| old.chains.get(*n) != Some(*r))
        .collect();
    let removed: Vec<&String> = old
        .chains
        .keys()
        .filter(|n| !new.chains.contains_key(*n))
        .collect();
    // Flush first: a chain or set still named by a rule cannot be deleted.
    for (name, _) in changed.iter().filter(|(n, _)| old.chains.contains_key(*n)) {
        let _ = writeln!(out, "flush chain {TABLE} {name}");
    }
    for name in &removed {
        let _ = writeln!(out, "flush chain {TABLE} {name}");
    }
    for name in &removed {
        let _ = writeln!(out, "delete chain {TABLE} {name}");
    }
    for (name, set) in &old.sets {
        match new.sets.get(name) {
            Some(n) if n.kind == set.kind => {}
            _ => {
                let _ = writeln!(out, "delete set {TABLE} {name}");
            }
        }
    }
    for (name, set) in &new.sets {
        match old.sets.get(name) {
            Some(o) if o.kind == set.kind => {
                elements(
                    &mut out,
                    "delete",
                    name,
                    o.elements.difference(&set.elements).cloned(),
                );
                elements(
                    &mut out,
                    "add",
                    name,
                    set.elements.difference(&o.elements).cloned(),
                );
            }
            _ => {
                let _ = writeln!(out, "add set {TABLE} {name} {{ {} }}", set.kind.spec());
                elements(&mut out, "add", name, set.elements.iter().cloned());
            }
        }
    }
    for (name, _) in changed.iter().filter(|(n, _)| !old.chains.contains_key(*n)) {
        let _ = writeln!(out, "{}", chain_decl(name));
    }
    for (name, bodies) in changed {
        rules(&mut out, name, bodies);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(kind: SetKind, items: &[&str]) -> SetDef {
        SetDef {
            kind,
            elements: items.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn table(sel: &[&str], extra_chain: bool) -> Ruleset {
        let mut rs = Ruleset::default();
        rs.sets
            .insert("ingress_isolated".into(), set(SetKind::Addr, sel));
        rs.sets.insert("p_sel".into(), set(SetKind::Addr, sel));
        rs.chains.insert(
            FORWARD.into(),
            vec!["ip daddr @ingress_isolated jump ingress".into()],
        );
        let mut ingress = vec![];
        if extra_chain {
            ingress.push("ip daddr @p_sel jump p_in".into());
            rs.chains.insert("p_in".into(), vec!["accept".into()]);
        }
        ingress.push("drop".into());
        rs.chains.insert("ingress".into(), ingress);
        rs
    }

    #[test]
    fn a_pod_more_is_one_element_per_set() {
        let old = table(&["10.244.0.2"], true);
        let new = table(&["10.244.0.2", "10.244.0.3"], true);
        assert_eq!(
            render_diff(&old, &new).unwrap(),
            "add element inet keelson-netpol ingress_isolated { 10.244.0.3 }\n\
             add element inet keelson-netpol p_sel { 10.244.0.3 }\n"
        );
        assert_eq!(render_diff(&new, &new), None);
    }

    #[test]
    fn a_removed_chain_is_unhooked_before_it_is_deleted() {
        let diff = render_diff(&table(&["10.244.0.2"], true), &table(&[], false)).unwrap();
        let pos = |s: &str| diff.find(s).unwrap_or_else(|| panic!("{s} in {diff}"));
        assert!(
            pos("flush chain inet keelson-netpol ingress")
                < pos("delete chain inet keelson-netpol p_in")
        );
        assert!(diff.contains("delete element inet keelson-netpol p_sel { 10.244.0.2 }"));
        assert!(
            diff.ends_with("add rule inet keelson-netpol ingress drop\n"),
            "{diff}"
        );
    }

    #[test]
    fn no_policy_is_no_table() {
        let full = table(&["10.244.0.2"], true);
        let gone = render_diff(&full, &Ruleset::default()).unwrap();
        assert_eq!(
            gone,
            "add table inet keelson-netpol\ndelete table inet keelson-netpol\n"
        );
        let back = render_diff(&Ruleset::default(), &full).unwrap();
        assert!(back.contains("hook forward"), "{back}");
        // Sets exist before the rules that name them.
        assert!(back.find("add set").unwrap() < back.find("add rule").unwrap());
    }
}
