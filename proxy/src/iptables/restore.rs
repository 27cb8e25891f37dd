//! Assembling one iptables-restore input from rendered rules, and reading iptables-save output.

use std::collections::{BTreeMap, BTreeSet};

use super::render::{
    self, Jump, ServiceRules, CANARY, EXTERNAL_SERVICES, FORWARD, MARK_MASQ, NODEPORTS,
    POSTROUTING, SERVICES,
};

/// What one restore call has to write.
pub struct RestoreInput<'a> {
    /// Every service port's rules: the shared chains (KUBE-SERVICES, ...) are always rewritten.
    pub all: Vec<&'a ServiceRules>,
    /// Service ports whose own chains are (re)written in this call.
    pub rewrite: Vec<&'a ServiceRules>,
    /// Stale chains of ours to flush and delete.
    pub delete_chains: Vec<String>,
    /// Jumps from built-in chains that are missing.
    pub missing_jumps: Vec<Jump>,
}

fn declare(out: &mut String, chain: &str) {
    out.push(':');
    out.push_str(chain);
    out.push_str(" - [0:0]\n");
}

/// Renders the text for `iptables-restore --noflush`. Declaring a chain flushes it, so the
/// shared chains are rebuilt completely while untouched services' chains stay as they are.
pub fn restore_text(input: &RestoreInput) -> String {
    let mut out = String::new();
    out.push_str("*filter\n");
    for chain in [SERVICES, EXTERNAL_SERVICES, FORWARD, CANARY] {
        declare(&mut out, chain);
    }
    for j in input.missing_jumps.iter().filter(|j| j.table == "filter") {
        out.push_str(&render::jump_rule(j));
    }
    out.push_str(&render::canary_rule());
    for s in &input.all {
        out.push_str(&s.filter_services);
    }
    for s in &input.all {
        out.push_str(&s.filter_external);
    }
    out.push_str(&render::forward_rules());
    out.push_str("COMMIT\n*nat\n");
    for chain in [SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ, CANARY] {
        declare(&mut out, chain);
    }
    for s in &input.rewrite {
        for chain in &s.chains {
            declare(&mut out, chain);
        }
    }
    for chain in &input.delete_chains {
        declare(&mut out, chain);
    }
    for j in input.missing_jumps.iter().filter(|j| j.table == "nat") {
        out.push_str(&render::jump_rule(j));
    }
    out.push_str(&render::canary_rule());
    out.push_str(&render::masquerade_rules());
    for s in &input.all {
        out.push_str(&s.nat_services);
    }
    out.push_str(&render::nodeports_jump());
    for s in &input.all {
        out.push_str(&s.nat_nodeports);
    }
    for s in &input.rewrite {
        out.push_str(&s.chain_rules);
    }
    for chain in &input.delete_chains {
        out.push_str("-X ");
        out.push_str(chain);
        out.push('\n');
    }
    out.push_str("COMMIT\n");
    out
}

/// The parts of `iptables-save` output a full sync needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SavedState {
    /// Chains per table.
    pub chains: BTreeMap<String, BTreeSet<String>>,
    /// (table, from, to) for every rule in a built-in chain that jumps somewhere.
    pub builtin_jumps: BTreeSet<(String, String, String)>,
}

const BUILTIN: [&str; 5] = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];

/// Parses `iptables-save` output.
pub fn parse_save(text: &str) -> SavedState {
    let mut state = SavedState::default();
    let mut table = String::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.trim().to_string();
        } else if let Some(rest) = line.strip_prefix(':') {
            if let Some(name) = rest.split_whitespace().next() {
                state
                    .chains
                    .entry(table.clone())
                    .or_default()
                    .insert(name.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("-A ") {
            let mut words = rest.split_whitespace();
            let Some(from) = words.next() else { continue };
            if !BUILTIN.contains(&from) {
                continue;
            }
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let Some(pos) = words.iter().rposition(|w| *w == "-j") {
                if let Some(to) = words.get(pos + 1) {
                    state
                        .builtin_jumps
                        .insert((table.clone(), from.to_string(), to.to_string()));
                }
            }
        }
    }
    state
}

impl SavedState {
    pub fn has_jump(&self, j: &Jump) -> bool {
        self.builtin_jumps
            .contains(&(j.table.to_string(), j.from.to_string(), j.to.to_string()))
    }

    /// nat chains with one of our per-service prefixes.
    pub fn owned_nat_chains(&self) -> BTreeSet<String> {
        self.chains
            .get("nat")
            .map(|c| {
                c.iter()
                    .filter(|n| render::OWNED_PREFIXES.iter().any(|p| n.starts_with(p)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chains_and_jumps() {
        let text = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SVC-AAAA - [0:0]\n:OTHER-CHAIN - [0:0]\n\
                    -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
                    -A KUBE-SVC-AAAA -j KUBE-SEP-BBBB\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n";
        let s = parse_save(text);
        assert_eq!(
            s.owned_nat_chains().into_iter().collect::<Vec<_>>(),
            vec!["KUBE-SVC-AAAA".to_string()]
        );
        assert!(s.has_jump(&render::JUMPS[5]));
        assert!(!s.has_jump(&render::JUMPS[6]));
        assert!(s.chains["filter"].contains("INPUT"));
    }
}
