//! Pure rendering of kube-proxy-compatible iptables-restore text, one function per rule kind.

use std::fmt::Write;

use crate::cidr::Ipv4Cidr;
use crate::hash;
use crate::model::{Endpoint, ServicePort};

pub const MARK_MASQ: &str = "KUBE-MARK-MASQ";
pub const POSTROUTING: &str = "KUBE-POSTROUTING";
pub const SERVICES: &str = "KUBE-SERVICES";
pub const NODEPORTS: &str = "KUBE-NODEPORTS";
pub const EXTERNAL_SERVICES: &str = "KUBE-EXTERNAL-SERVICES";
pub const FORWARD: &str = "KUBE-FORWARD";
pub const CANARY: &str = "KUBE-PROXY-CANARY";
/// The masquerade bit, the same as kube-proxy's default so both can coexist during migration.
pub const MASQ_MARK: &str = "0x4000";
/// Per-service chain prefixes this proxy owns; only these are ever deleted as stale.
pub const OWNED_PREFIXES: [&str; 4] = ["KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-SEP-"];

/// Options that change the rendered text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Traffic to a cluster IP from outside this range is masqueraded (kube-proxy's --cluster-cidr).
    pub cluster_cidr: Option<Ipv4Cidr>,
}

/// The rules of one service port, split by the chain that holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRules {
    /// Chains owned by this service port (KUBE-SVC/SVL/EXT/SEP), in render order.
    pub chains: Vec<String>,
    /// Rules inside the owned chains.
    pub chain_rules: String,
    /// nat KUBE-SERVICES entries (cluster IP, external IPs).
    pub nat_services: String,
    /// nat KUBE-NODEPORTS entries.
    pub nat_nodeports: String,
    /// filter KUBE-SERVICES entries (reject/drop when no endpoints).
    pub filter_services: String,
    /// filter KUBE-EXTERNAL-SERVICES entries.
    pub filter_external: String,
}

fn proto(sp: &ServicePort) -> String {
    let p = sp.name.protocol.lower();
    format!("-m {p} -p {p}")
}

/// Which endpoint chains a service port needs.
struct Plan<'a> {
    cluster: Vec<&'a Endpoint>,
    local: Vec<&'a Endpoint>,
    need_svc: bool,
    need_svl: bool,
    need_ext: bool,
}

fn plan(sp: &ServicePort) -> Plan<'_> {
    let cluster = sp.cluster_endpoints();
    let local = sp.local_endpoints();
    let external_uses_local = sp.is_external() && sp.external_local;
    Plan {
        // ETP Local still routes pod and node-local traffic through the cluster chain.
        need_svc: !cluster.is_empty() && (!sp.internal_local || sp.is_external()),
        need_svl: !local.is_empty() && (sp.internal_local || external_uses_local),
        need_ext: sp.is_external() && !sp.external_endpoints().is_empty(),
        cluster,
        local,
    }
}

/// Renders everything that belongs to one service port.
pub fn service_rules(sp: &ServicePort, opts: &RenderOptions) -> ServiceRules {
    let mut out = ServiceRules::default();
    let p = plan(sp);
    let spn = &sp.name;
    let svc = hash::svc_chain(spn);
    let svl = hash::svl_chain(spn);
    let ext = hash::ext_chain(spn);
    let internal_target = if sp.internal_local { &svl } else { &svc };
    let internal_ok = if sp.internal_local {
        p.need_svl
    } else {
        p.need_svc
    };

    if p.need_svc {
        out.chains.push(svc.clone());
    }
    if p.need_svl {
        out.chains.push(svl.clone());
    }
    if p.need_ext {
        out.chains.push(ext.clone());
    }
    let mut seps: Vec<&Endpoint> = Vec::new();
    if p.need_svc {
        seps.extend(&p.cluster);
    }
    if p.need_svl {
        seps.extend(&p.local);
    }
    seps.sort();
    seps.dedup();
    out.chains
        .extend(seps.iter().map(|ep| hash::sep_chain(spn, ep)));

    entry_rules(sp, &p, internal_target, internal_ok, &ext, &mut out);
    if internal_ok {
        cluster_masq_rule(sp, internal_target, opts, &mut out.chain_rules);
    }
    if p.need_svc {
        endpoint_jumps(sp, &svc, &p.cluster, &mut out.chain_rules);
    }
    if p.need_svl {
        endpoint_jumps(sp, &svl, &p.local, &mut out.chain_rules);
    }
    if p.need_ext {
        ext_rules(sp, &p, &ext, &svc, &svl, opts, &mut out.chain_rules);
    }
    for ep in seps {
        sep_rules(sp, ep, &mut out.chain_rules);
    }
    out
}

/// The entries of each destination of the service port (its cluster IP, external IPs and
/// NodePort): in nat KUBE-SERVICES and KUBE-NODEPORTS, a jump into the service's chains when
/// that destination has endpoints to go to; else in filter, REJECT when the service has no
/// endpoints at all, DROP when a Local traffic policy leaves none on this node.
fn entry_rules(
    sp: &ServicePort,
    p: &Plan,
    internal_target: &str,
    internal_ok: bool,
    ext: &str,
    out: &mut ServiceRules,
) {
    let spn = &sp.name;
    let pr = proto(sp);
    let (verdict, why) = if sp.has_endpoints() {
        ("DROP", "has no local endpoints")
    } else {
        ("REJECT", "has no endpoints")
    };
    let cluster_ip = format!("{pr} -d {}/32 --dport {}", sp.cluster_ip, sp.port);
    let _ = if internal_ok {
        writeln!(
            out.nat_services,
            "-A {SERVICES} -m comment --comment \"{spn} cluster IP\" {cluster_ip} -j {internal_target}"
        )
    } else {
        writeln!(
            out.filter_services,
            "-A {SERVICES} -m comment --comment \"{spn} {why}\" {cluster_ip} -j {verdict}"
        )
    };
    for ip in &sp.external_ips {
        let dst = format!("{pr} -d {ip}/32 --dport {}", sp.port);
        let _ = if p.need_ext {
            writeln!(
                out.nat_services,
                "-A {SERVICES} -m comment --comment \"{spn} external IP\" {dst} -j {ext}"
            )
        } else {
            writeln!(
                out.filter_external,
                "-A {EXTERNAL_SERVICES} -m comment --comment \"{spn} {why}\" {dst} -j {verdict}"
            )
        };
    }
    let Some(np) = sp.node_port else {
        return;
    };
    let _ = if p.need_ext {
        writeln!(
            out.nat_nodeports,
            "-A {NODEPORTS} -m comment --comment \"{spn}\" {pr} --dport {np} -j {ext}"
        )
    } else {
        writeln!(
            out.filter_external,
            "-A {EXTERNAL_SERVICES} -m comment --comment \"{spn} {why}\" -m addrtype --dst-type LOCAL {pr} --dport {np} -j {verdict}"
        )
    };
}

/// Traffic to the cluster IP from outside the pod network is masqueraded so replies return here.
fn cluster_masq_rule(sp: &ServicePort, chain: &str, opts: &RenderOptions, out: &mut String) {
    let Some(cidr) = opts.cluster_cidr else {
        return;
    };
    let _ = writeln!(
        out,
        "-A {chain} -m comment --comment \"{} cluster IP\" {} -d {}/32 --dport {} ! -s {cidr} -j {MARK_MASQ}",
        sp.name,
        proto(sp),
        sp.cluster_ip,
        sp.port
    );
}

/// Affinity checks then a random pick over the endpoints (kube-proxy's statistic cascade).
fn endpoint_jumps(sp: &ServicePort, chain: &str, eps: &[&Endpoint], out: &mut String) {
    let spn = &sp.name;
    if let Some(timeout) = sp.affinity_timeout {
        for ep in eps {
            let sep = hash::sep_chain(spn, ep);
            let _ = writeln!(
                out,
                "-A {chain} -m comment --comment \"{spn} -> {}\" -m recent --name {sep} --mask 255.255.255.255 --rsource --rcheck --seconds {timeout} --reap -j {sep}",
                ep.addr()
            );
        }
    }
    let n = eps.len();
    for (i, ep) in eps.iter().enumerate() {
        let sep = hash::sep_chain(spn, ep);
        if i + 1 < n {
            let prob = 1.0 / (n - i) as f64;
            let _ = writeln!(
                out,
                "-A {chain} -m comment --comment \"{spn} -> {}\" -m statistic --mode random --probability {prob:.10} -j {sep}",
                ep.addr()
            );
        } else {
            let _ = writeln!(
                out,
                "-A {chain} -m comment --comment \"{spn} -> {}\" -j {sep}",
                ep.addr()
            );
        }
    }
}

/// KUBE-EXT-*: masquerade (policy Cluster) or keep the client address (policy Local).
fn ext_rules(
    sp: &ServicePort,
    p: &Plan,
    ext: &str,
    svc: &str,
    svl: &str,
    opts: &RenderOptions,
    out: &mut String,
) {
    let spn = &sp.name;
    if !sp.external_local {
        let _ = writeln!(
            out,
            "-A {ext} -m comment --comment \"masquerade traffic for {spn} external destinations\" -j {MARK_MASQ}"
        );
        let _ = writeln!(out, "-A {ext} -j {svc}");
        return;
    }
    if p.need_svc {
        if let Some(cidr) = opts.cluster_cidr {
            let _ = writeln!(
                out,
                "-A {ext} -s {cidr} -m comment --comment \"pod traffic for {spn} external destinations\" -j {svc}"
            );
        }
        let _ = writeln!(
            out,
            "-A {ext} -m comment --comment \"masquerade LOCAL traffic for {spn} external destinations\" -m addrtype --src-type LOCAL -j {MARK_MASQ}"
        );
        let _ = writeln!(
            out,
            "-A {ext} -m comment --comment \"route LOCAL traffic for {spn} external destinations\" -m addrtype --src-type LOCAL -j {svc}"
        );
    }
    let _ = writeln!(out, "-A {ext} -j {svl}");
}

/// KUBE-SEP-*: hairpin masquerade, then DNAT (remembering the client for affinity).
fn sep_rules(sp: &ServicePort, ep: &Endpoint, out: &mut String) {
    let spn = &sp.name;
    let sep = hash::sep_chain(spn, ep);
    let _ = writeln!(
        out,
        "-A {sep} -m comment --comment \"{spn}\" -s {}/32 -j {MARK_MASQ}",
        ep.ip
    );
    let recent = if sp.affinity_timeout.is_some() {
        format!(" -m recent --set --name {sep} --mask 255.255.255.255 --rsource")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "-A {sep} -m comment --comment \"{spn}\"{recent} {} -j DNAT --to-destination {}",
        proto(sp),
        ep.addr()
    );
}

/// KUBE-MARK-MASQ and KUBE-POSTROUTING: mark on the way in, masquerade and clear on the way out.
pub fn masquerade_rules() -> String {
    format!(
        "-A {MARK_MASQ} -j MARK --or-mark {MASQ_MARK}\n\
         -A {POSTROUTING} -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN\n\
         -A {POSTROUTING} -j MARK --xor-mark {MASQ_MARK}\n\
         -A {POSTROUTING} -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n"
    )
}

/// KUBE-FORWARD: let marked and established service traffic through a DROP forward policy.
pub fn forward_rules() -> String {
    format!(
        "-A {FORWARD} -m conntrack --ctstate INVALID -j DROP\n\
         -A {FORWARD} -m comment --comment \"kubernetes forwarding rules\" -m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT\n\
         -A {FORWARD} -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
    )
}

/// The canary rule: if it disappears, someone flushed the table.
pub fn canary_rule() -> String {
    format!("-A {CANARY} -m comment --comment \"keelson-proxy canary\" -j RETURN\n")
}

/// The last KUBE-SERVICES rule: anything to a local address goes through the NodePorts.
pub fn nodeports_jump() -> String {
    format!(
        "-A {SERVICES} -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j {NODEPORTS}\n"
    )
}

/// A jump from a built-in chain into ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    pub table: &'static str,
    pub from: &'static str,
    pub to: &'static str,
    pub spec: &'static str,
}

/// The built-in-chain jumps kube-proxy installs.
pub const JUMPS: [Jump; 8] = [
    Jump { table: "filter", from: "INPUT", to: EXTERNAL_SERVICES, spec: "-m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\"" },
    Jump { table: "filter", from: "FORWARD", to: EXTERNAL_SERVICES, spec: "-m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\"" },
    Jump { table: "filter", from: "FORWARD", to: SERVICES, spec: "-m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\"" },
    Jump { table: "filter", from: "OUTPUT", to: SERVICES, spec: "-m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\"" },
    Jump { table: "filter", from: "FORWARD", to: FORWARD, spec: "-m comment --comment \"kubernetes forwarding rules\"" },
    Jump { table: "nat", from: "PREROUTING", to: SERVICES, spec: "-m comment --comment \"kubernetes service portals\"" },
    Jump { table: "nat", from: "OUTPUT", to: SERVICES, spec: "-m comment --comment \"kubernetes service portals\"" },
    Jump { table: "nat", from: "POSTROUTING", to: POSTROUTING, spec: "-m comment --comment \"kubernetes postrouting rules\"" },
];

/// `-I` line that installs a missing jump.
pub fn jump_rule(j: &Jump) -> String {
    format!("-I {} {} -j {}\n", j.from, j.spec, j.to)
}
