//! Policies, pods and namespaces to the node's [`Ruleset`], with upstream's semantics:
//! - a pod is isolated in a direction once any policy of that type selects it; then only what
//!   some policy selecting it allows passes (the union of allows, in any order);
//! - a rule allows when one of its peers and one of its ports match; no peers or no ports means
//!   any; a named port resolves on the pod that owns it (the destination);
//! - replies of allowed connections pass (conntrack), node traffic is not checked (see FORWARD).
//!
//! Only this node's pods are isolated here: a packet is checked for egress on its source's node
//! and for ingress on its destination's node. Peer sets hold pods of every node.
//!
//! Each policy direction is one chain. Its rules mark the packet as allowed; the dispatch chain
//! drops what no policy marked. Marks rather than verdicts, because an egress allow must still
//! go on to the ingress check of the same packet.
//!
//! What cannot be compiled (a bad selector, CIDR or protocol) is left out, so it allows nothing:
//! a broken rule fails closed, and is reported.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

use keelson_apimachinery::hash::fnv1a_64;

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use keelson_apimachinery::LabelSelector;

use crate::from_k8s::{NamespaceInfo, PodInfo};
use crate::ranges::{self, Range};
use crate::ruleset::{Ruleset, SetDef, SetKind, FORWARD};

/// Packet mark bits: "some egress policy allows this", "some ingress policy allows this". Apart
/// from kube-proxy's 0x4000/0x8000 and the proxy's masquerade bit.
pub const EGRESS_ALLOWED: u32 = 0x0001_0000;
pub const INGRESS_ALLOWED: u32 = 0x0002_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Ingress,
    Egress,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Ingress => "ingress",
            Dir::Egress => "egress",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Dir::Ingress => "in",
            Dir::Egress => "eg",
        }
    }
    fn mark(self) -> u32 {
        match self {
            Dir::Ingress => INGRESS_ALLOWED,
            Dir::Egress => EGRESS_ALLOWED,
        }
    }
    /// The address of the selected (own) pod, and of the other end.
    fn own(self) -> &'static str {
        match self {
            Dir::Ingress => "ip daddr",
            Dir::Egress => "ip saddr",
        }
    }
    fn peer(self) -> &'static str {
        match self {
            Dir::Ingress => "ip saddr",
            Dir::Egress => "ip daddr",
        }
    }
    fn isolated(self) -> String {
        format!("{}_isolated", self.name())
    }
}

/// The ruleset, and what was left out of it and why (one line per problem, naming the policy).
#[derive(Debug, Default)]
pub struct Compiled {
    pub ruleset: Ruleset,
    pub problems: Vec<String>,
}

/// Compiles every policy for node `node`. Output depends only on the inputs' content, not their
/// order, so an unchanged cluster renders an unchanged ruleset (and no nft call).
pub fn compile<P: Borrow<NetworkPolicy>>(
    node: &str,
    policies: &[P],
    pods: &[PodInfo],
    namespaces: &[NamespaceInfo],
) -> Compiled {
    let mut by_ns: HashMap<&str, Vec<&PodInfo>> = HashMap::new();
    for p in pods {
        by_ns.entry(p.namespace.as_str()).or_default().push(p);
    }
    let mut c = Compiler {
        node,
        pods,
        by_ns,
        namespaces,
        out: Compiled::default(),
    };
    if policies.is_empty() {
        return c.out;
    }
    let mut sorted: Vec<&NetworkPolicy> = policies.iter().map(Borrow::borrow).collect();
    sorted.sort_by_key(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()));
    let mut dispatch = [Vec::new(), Vec::new()];
    for p in sorted {
        c.policy(p, &mut dispatch);
    }
    let [ingress, egress] = dispatch;
    for (dir, mut rules) in [(Dir::Ingress, ingress), (Dir::Egress, egress)] {
        rules.push(format!("meta mark and {:#x} == 0 counter drop", dir.mark()));
        c.out.ruleset.chains.insert(dir.name().into(), rules);
        c.out
            .ruleset
            .sets
            .entry(dir.isolated())
            .or_insert_with(|| addr_set(BTreeSet::new()));
    }
    c.out.ruleset.chains.insert(
        FORWARD.into(),
        vec![
            "ct state established,related accept".into(),
            format!(
                "meta mark set meta mark and {:#x}",
                !(EGRESS_ALLOWED | INGRESS_ALLOWED)
            ),
            "ip saddr @egress_isolated jump egress".into(),
            "ip daddr @ingress_isolated jump ingress".into(),
        ],
    );
    c.out
}

fn addr_set(elements: BTreeSet<String>) -> SetDef {
    SetDef {
        kind: SetKind::Addr,
        elements,
    }
}

/// Short, stable chain and set names from "namespace/name" (nft names are at most 255 bytes; a
/// namespace and a name together may be 316).
fn policy_id(key: &str) -> String {
    format!("p_{:016x}", fnv1a_64(key.as_bytes()))
}

fn selector(sel: Option<&K8sSelector>) -> Result<LabelSelector, String> {
    match sel {
        None => Ok(LabelSelector::everything()),
        Some(s) => serde_json::to_value(s)
            .map_err(|e| e.to_string())
            .and_then(|v| LabelSelector::from_json(&v).map_err(|e| e.to_string())),
    }
}

fn protocol(p: &NetworkPolicyPort) -> Result<&'static str, String> {
    match p.protocol.as_deref().unwrap_or("TCP") {
        "TCP" => Ok("tcp"),
        "UDP" => Ok("udp"),
        "SCTP" => Ok("sctp"),
        other => Err(format!("protocol {other:?} is not TCP, UDP or SCTP")),
    }
}

struct Compiler<'a> {
    node: &'a str,
    pods: &'a [PodInfo],
    /// Pods by namespace: a policy and most peers look at one namespace, not the cluster.
    by_ns: HashMap<&'a str, Vec<&'a PodInfo>>,
    namespaces: &'a [NamespaceInfo],
    out: Compiled,
}

/// One rule's peers and ports, as read from either an ingress or an egress rule.
struct RuleSpec<'a> {
    peers: Option<&'a Vec<NetworkPolicyPeer>>,
    ports: Option<&'a Vec<NetworkPolicyPort>>,
}

impl<'a> Compiler<'a> {
    fn problem(&mut self, key: &str, what: String) {
        self.out
            .problems
            .push(format!("NetworkPolicy {key}: {what}"));
    }

    fn set(&mut self, name: String, kind: SetKind, elements: BTreeSet<String>) {
        self.out
            .ruleset
            .sets
            .insert(name, SetDef { kind, elements });
    }

    fn policy(&mut self, p: &NetworkPolicy, dispatch: &mut [Vec<String>; 2]) {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let key = format!("{ns}/{}", p.metadata.name.clone().unwrap_or_default());
        let Some(spec) = &p.spec else {
            return self.problem(&key, "no spec".into());
        };
        let sel = match selector(spec.pod_selector.as_ref()) {
            Ok(s) => s,
            Err(e) => return self.problem(&key, format!("spec.podSelector: {e}")),
        };
        let local: Vec<&'a PodInfo> = self
            .in_namespace(&ns)
            .filter(|pod| pod.node == self.node)
            .filter(|pod| sel.matches_map(&pod.labels))
            .collect();
        let id = policy_id(&key);
        let local_ips: BTreeSet<String> = local.iter().map(|p| p.ip.to_string()).collect();
        self.set(format!("{id}_sel"), SetKind::Addr, local_ips.clone());
        // Upstream's defaulting: Ingress always, Egress when there are egress rules.
        let types = spec.policy_types.clone().unwrap_or_else(|| {
            let mut t = vec!["Ingress".to_string()];
            if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
                t.push("Egress".into());
            }
            t
        });
        for (dir, slot) in [(Dir::Ingress, 0), (Dir::Egress, 1)] {
            if !types.iter().any(|t| {
                t == if dir == Dir::Ingress {
                    "Ingress"
                } else {
                    "Egress"
                }
            }) {
                continue;
            }
            let specs: Vec<RuleSpec> = match dir {
                Dir::Ingress => spec
                    .ingress
                    .iter()
                    .flatten()
                    .map(|r| RuleSpec {
                        peers: r.from.as_ref(),
                        ports: r.ports.as_ref(),
                    })
                    .collect(),
                Dir::Egress => spec
                    .egress
                    .iter()
                    .flatten()
                    .map(|r| RuleSpec {
                        peers: r.to.as_ref(),
                        ports: r.ports.as_ref(),
                    })
                    .collect(),
            };
            let chain = format!("{id}_{}", dir.tag());
            let mut rules = Vec::new();
            for (i, r) in specs.iter().enumerate() {
                let base = format!("{chain}{i}");
                rules.extend(self.rule(&key, &ns, dir, &base, r, &local));
            }
            self.out.ruleset.chains.insert(chain.clone(), rules);
            let isolated = self
                .out
                .ruleset
                .sets
                .entry(dir.isolated())
                .or_insert_with(|| addr_set(BTreeSet::new()));
            isolated.elements.extend(local_ips.iter().cloned());
            if let Some(d) = dispatch.get_mut(slot) {
                d.push(format!(
                    "{} @{id}_sel jump {chain} comment \"{key}\"",
                    dir.own()
                ));
            }
        }
    }

    /// Pods a peer with selectors names (none for an ipBlock peer).
    fn peer_pods(&self, ns: &str, peer: &NetworkPolicyPeer) -> Result<Vec<&'a PodInfo>, String> {
        if peer.pod_selector.is_none() && peer.namespace_selector.is_none() {
            return Ok(Vec::new());
        }
        let pod_sel =
            selector(peer.pod_selector.as_ref()).map_err(|e| format!("podSelector: {e}"))?;
        let namespaces: BTreeSet<&str> = match &peer.namespace_selector {
            None => [ns].into_iter().collect(),
            Some(s) => {
                let ns_sel = selector(Some(s)).map_err(|e| format!("namespaceSelector: {e}"))?;
                self.namespaces
                    .iter()
                    .filter(|n| ns_sel.matches_map(&n.labels))
                    .map(|n| n.name.as_str())
                    .collect()
            }
        };
        Ok(namespaces
            .into_iter()
            .flat_map(|n| self.in_namespace(n))
            .filter(|p| pod_sel.matches_map(&p.labels))
            .collect())
    }

    fn in_namespace(&self, ns: &str) -> impl Iterator<Item = &'a PodInfo> + '_ {
        self.by_ns.get(ns).into_iter().flatten().copied()
    }

    fn block(peer: &NetworkPolicyPeer) -> Result<Vec<Range>, String> {
        let Some(b) = &peer.ip_block else {
            return Ok(Vec::new());
        };
        let cidr = ranges::parse_cidr(&b.cidr).map_err(|e| format!("ipBlock.cidr: {e}"))?;
        let holes = b
            .except
            .iter()
            .flatten()
            .map(|e| ranges::parse_cidr(e).map_err(|e| format!("ipBlock.except: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ranges::subtract(cidr, &holes))
    }

    /// The rules of one ingress or egress rule; its sets are added to the ruleset.
    fn rule(
        &mut self,
        key: &str,
        ns: &str,
        dir: Dir,
        base: &str,
        r: &RuleSpec,
        local: &[&'a PodInfo],
    ) -> Vec<String> {
        let any_peer = r.peers.is_none_or(|p| p.is_empty());
        let mut peer_matches = Vec::new();
        let mut peer_pods: Vec<&'a PodInfo> = Vec::new();
        let mut blocks: Vec<Range> = Vec::new();
        if any_peer {
            peer_matches.push(String::new());
        } else {
            let (mut has_pods, mut has_blocks) = (false, false);
            for (j, peer) in r.peers.iter().copied().flatten().enumerate() {
                match (Self::block(peer), self.peer_pods(ns, peer)) {
                    (Ok(b), Ok(pods)) => {
                        has_blocks |= peer.ip_block.is_some();
                        has_pods |= peer.ip_block.is_none();
                        blocks.extend(b);
                        peer_pods.extend(pods);
                    }
                    (Err(e), _) | (_, Err(e)) => self.problem(key, format!("{base} peer {j}: {e}")),
                }
            }
            if has_pods {
                let ips = peer_pods.iter().map(|p| p.ip.to_string()).collect();
                self.set(format!("{base}_pods"), SetKind::Addr, ips);
                peer_matches.push(format!("{} @{base}_pods", dir.peer()));
            }
            if has_blocks {
                let els = ranges::union(blocks.clone())
                    .iter()
                    .map(Range::element)
                    .collect();
                self.set(format!("{base}_blocks"), SetKind::Interval, els);
                peer_matches.push(format!("{} @{base}_blocks", dir.peer()));
            }
        }
        // A named port is looked up on the pod that receives: the selected pod for ingress,
        // the peer for egress (any pod when any peer is allowed).
        let in_blocks = |ip: Ipv4Addr| {
            blocks
                .iter()
                .any(|b| (b.first..=b.last).contains(&u32::from(ip)))
        };
        let owners: Vec<&PodInfo> = match dir {
            Dir::Ingress => local.to_vec(),
            Dir::Egress if any_peer => self.pods.iter().collect(),
            Dir::Egress if blocks.is_empty() => peer_pods.clone(),
            Dir::Egress => self
                .pods
                .iter()
                .filter(|p| in_blocks(p.ip))
                .chain(peer_pods.iter().copied())
                .collect(),
        };
        let mut port_matches = Vec::new();
        let mut named = BTreeSet::new();
        let mut has_named = false;
        if r.ports.is_none_or(|p| p.is_empty()) {
            port_matches.push(String::new());
        }
        for (j, port) in r.ports.iter().copied().flatten().enumerate() {
            let proto = match protocol(port) {
                Ok(p) => p,
                Err(e) => {
                    self.problem(key, format!("{base} port {j}: {e}"));
                    continue;
                }
            };
            match (&port.port, port.end_port) {
                (None, _) => port_matches.push(format!("meta l4proto {proto}")),
                (Some(IntOrString::Int(n)), Some(end)) => {
                    port_matches.push(format!("meta l4proto {proto} th dport {n}-{end}"))
                }
                (Some(IntOrString::Int(n)), None) => {
                    port_matches.push(format!("meta l4proto {proto} th dport {n}"))
                }
                (Some(IntOrString::String(name)), _) => {
                    has_named = true;
                    let upper = proto.to_ascii_uppercase();
                    for pod in &owners {
                        for p in pod
                            .ports
                            .iter()
                            .filter(|p| &p.name == name && p.protocol == upper)
                        {
                            named.insert(format!("{} . {proto} . {}", pod.ip, p.port));
                        }
                    }
                }
            }
        }
        if has_named {
            self.set(format!("{base}_named"), SetKind::AddrProtoPort, named);
            port_matches.push(format!("ip daddr . meta l4proto . th dport @{base}_named"));
        }
        let mut out = Vec::new();
        for pm in &peer_matches {
            for po in &port_matches {
                let parts: Vec<&str> = [pm.as_str(), po.as_str()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect();
                let mut body = parts.join(" ");
                if !body.is_empty() {
                    body.push(' ');
                }
                body.push_str(&format!(
                    "meta mark set meta mark or {:#x} comment \"{key}\"",
                    dir.mark()
                ));
                out.push(body);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
