//! Masquerade for traffic leaving the pod subnet (`ipMasq`): one nat chain per attachment,
//! jumped to from POSTROUTING, each rule tagged with the network's comment. Destinations in
//! `nonMasqueradeCIDRs` (the cluster's pod network, so that pods on other nodes see the client
//! pod's own address) are left alone too. Rules are rendered as iptables-restore text (pure
//! functions below) and applied in a single call.

use std::io::{self, Write};
use std::net::IpAddr;
use std::process::{Command, Stdio};

use ipnetwork::IpNetwork;

use crate::names::MASQ_CHAIN_PREFIX;

/// Runs iptables-save / iptables-restore (or the ip6tables ones).
pub trait Firewall {
    fn save_nat(&self, v6: bool) -> io::Result<String>;
    fn restore_nat(&self, v6: bool, text: &str) -> io::Result<()>;
}

/// The comment that marks rules of one network.
pub fn comment(network: &str) -> String {
    let safe: String = network
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("keelson-cni:{safe}")
}

/// Rules for one attachment of one family: ACCEPT inside the subnet and inside each of
/// `except` of the same family, MASQUERADE the rest except multicast.
pub fn render_add(
    network: &str,
    chain: &str,
    addrs: &[(IpAddr, IpNetwork)],
    except: &[IpNetwork],
) -> String {
    let c = comment(network);
    let v6 = addrs.first().is_some_and(|(ip, _)| ip.is_ipv6());
    let mut out = String::from("*nat\n");
    out.push_str(&format!(":{chain} - [0:0]\n"));
    let mut accepted: Vec<IpNetwork> = Vec::new();
    let own = addrs.iter().map(|(_, subnet)| *subnet);
    let others = except.iter().copied().filter(|n| n.is_ipv6() == v6);
    for net in own.chain(others) {
        if accepted.contains(&net) {
            continue;
        }
        accepted.push(net);
        out.push_str(&format!(
            "-A {chain} -d {net} -m comment --comment \"{c}\" -j ACCEPT\n"
        ));
    }
    let multicast = if v6 { "ff00::/8" } else { "224.0.0.0/4" };
    out.push_str(&format!(
        "-A {chain} ! -d {multicast} -m comment --comment \"{c}\" -j MASQUERADE\n"
    ));
    for (ip, _) in addrs {
        let host = if ip.is_ipv4() { 32 } else { 128 };
        out.push_str(&format!(
            "-A POSTROUTING -s {ip}/{host} -m comment --comment \"{c}\" -j {chain}\n"
        ));
    }
    out.push_str("COMMIT\n");
    out
}

/// Restore text that undoes exactly what `render_add` installed for these addresses. It fails
/// as a whole when the rules are not as added (gone, duplicated); callers then fall back to
/// `render_teardown` over iptables-save output.
pub fn render_remove(network: &str, chain: &str, addrs: &[IpAddr]) -> String {
    let c = comment(network);
    let mut out = String::from("*nat\n");
    for ip in addrs {
        let host = if ip.is_ipv4() { 32 } else { 128 };
        out.push_str(&format!(
            "-D POSTROUTING -s {ip}/{host} -m comment --comment \"{c}\" -j {chain}\n"
        ));
    }
    out.push_str(&format!("-F {chain}\n-X {chain}\nCOMMIT\n"));
    out
}

/// Chains of `network` found in iptables-save output (by the comment on their rules).
pub fn chains_of(save: &str, network: &str) -> Vec<String> {
    let c = comment(network);
    let mut chains = Vec::new();
    for line in save.lines().filter(|l| l.contains(&c)) {
        let mut words = line.split_whitespace();
        let (Some("-A"), Some(chain)) = (words.next(), words.next()) else {
            continue;
        };
        let target = line
            .split(" -j ")
            .nth(1)
            .map(|t| t.split_whitespace().next().unwrap_or(""));
        for name in [Some(chain), target].into_iter().flatten() {
            if name.starts_with(MASQ_CHAIN_PREFIX) && !chains.iter().any(|c| c == name) {
                chains.push(name.to_string());
            }
        }
    }
    chains
}

/// Restore text removing the chains of `network` for which `remove` is true: their jumps
/// first, then the chains. None when nothing matches.
pub fn render_teardown(save: &str, network: &str, remove: impl Fn(&str) -> bool) -> Option<String> {
    let doomed: Vec<String> = chains_of(save, network)
        .into_iter()
        .filter(|c| remove(c))
        .collect();
    if doomed.is_empty() {
        return None;
    }
    let mut out = String::from("*nat\n");
    for line in save.lines() {
        let Some(rest) = line.strip_prefix("-A ") else {
            continue;
        };
        let jumps_to_doomed = doomed.iter().any(|d| line.ends_with(&format!(" -j {d}")));
        let in_doomed = doomed.iter().any(|d| rest.starts_with(&format!("{d} ")));
        if jumps_to_doomed && !in_doomed {
            out.push_str(&format!("-D {rest}\n"));
        }
    }
    for d in &doomed {
        out.push_str(&format!("-F {d}\n-X {d}\n"));
    }
    out.push_str("COMMIT\n");
    Some(out)
}

pub struct Iptables;

impl Iptables {
    fn tool(v6: bool, what: &str) -> String {
        format!("{}{what}", if v6 { "ip6tables" } else { "iptables" })
    }
}

impl Firewall for Iptables {
    fn save_nat(&self, v6: bool) -> io::Result<String> {
        let out = Command::new(Self::tool(v6, "-save"))
            .args(["-t", "nat"])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{} failed: {}",
                Self::tool(v6, "-save"),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn restore_nat(&self, v6: bool, text: &str) -> io::Result<()> {
        let tool = Self::tool(v6, "-restore");
        let mut child = Command::new(&tool)
            .args(["-w", "5", "--noflush"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(text.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{tool} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_text_exact() {
        let text = render_add(
            "net1",
            "KCNI-00",
            &[("10.1.0.2".parse().unwrap(), "10.1.0.0/24".parse().unwrap())],
            &[],
        );
        assert_eq!(
            text,
            "*nat\n:KCNI-00 - [0:0]\n\
             -A KCNI-00 -d 10.1.0.0/24 -m comment --comment \"keelson-cni:net1\" -j ACCEPT\n\
             -A KCNI-00 ! -d 224.0.0.0/4 -m comment --comment \"keelson-cni:net1\" -j MASQUERADE\n\
             -A POSTROUTING -s 10.1.0.2/32 -m comment --comment \"keelson-cni:net1\" -j KCNI-00\n\
             COMMIT\n"
        );
    }

    #[test]
    fn cluster_cidr_accepted_before_masquerade() {
        let text = render_add(
            "net1",
            "KCNI-00",
            &[(
                "10.244.1.2".parse().unwrap(),
                "10.244.1.0/24".parse().unwrap(),
            )],
            &[
                "10.244.0.0/16".parse().unwrap(),
                "fd00:10::/48".parse().unwrap(),
                "10.244.1.0/24".parse().unwrap(),
            ],
        );
        assert_eq!(
            text,
            "*nat\n:KCNI-00 - [0:0]\n\
             -A KCNI-00 -d 10.244.1.0/24 -m comment --comment \"keelson-cni:net1\" -j ACCEPT\n\
             -A KCNI-00 -d 10.244.0.0/16 -m comment --comment \"keelson-cni:net1\" -j ACCEPT\n\
             -A KCNI-00 ! -d 224.0.0.0/4 -m comment --comment \"keelson-cni:net1\" -j MASQUERADE\n\
             -A POSTROUTING -s 10.244.1.2/32 -m comment --comment \"keelson-cni:net1\" -j KCNI-00\n\
             COMMIT\n"
        );
        let v6 = render_add(
            "net1",
            "KCNI-00",
            &[(
                "fd00:10:1::2".parse().unwrap(),
                "fd00:10:1::/64".parse().unwrap(),
            )],
            &[
                "10.244.0.0/16".parse().unwrap(),
                "fd00:10::/48".parse().unwrap(),
            ],
        );
        assert_eq!(
            v6,
            "*nat\n:KCNI-00 - [0:0]\n\
             -A KCNI-00 -d fd00:10:1::/64 -m comment --comment \"keelson-cni:net1\" -j ACCEPT\n\
             -A KCNI-00 -d fd00:10::/48 -m comment --comment \"keelson-cni:net1\" -j ACCEPT\n\
             -A KCNI-00 ! -d ff00::/8 -m comment --comment \"keelson-cni:net1\" -j MASQUERADE\n\
             -A POSTROUTING -s fd00:10:1::2/128 -m comment --comment \"keelson-cni:net1\" -j KCNI-00\n\
             COMMIT\n"
        );
    }

    #[test]
    fn remove_text_mirrors_add() {
        let text = render_remove("net1", "KCNI-00", &["10.1.0.2".parse().unwrap()]);
        assert_eq!(
            text,
            "*nat\n-D POSTROUTING -s 10.1.0.2/32 -m comment --comment \"keelson-cni:net1\" -j KCNI-00\n\
             -F KCNI-00\n-X KCNI-00\nCOMMIT\n"
        );
    }

    const SAVE: &str = "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [0:0]\n\
:POSTROUTING ACCEPT [0:0]\n:KCNI-aa - [0:0]\n:KCNI-bb - [0:0]\n:OTHER - [0:0]\n\
-A POSTROUTING -s 10.1.0.2/32 -m comment --comment keelson-cni:net1 -j KCNI-aa\n\
-A POSTROUTING -s 10.1.0.3/32 -m comment --comment keelson-cni:net1 -j KCNI-bb\n\
-A POSTROUTING -s 10.9.0.3/32 -m comment --comment keelson-cni:net2 -j KCNI-cc\n\
-A POSTROUTING -j OTHER\n\
-A KCNI-aa -d 10.1.0.0/24 -m comment --comment keelson-cni:net1 -j ACCEPT\n\
-A KCNI-aa ! -d 224.0.0.0/4 -m comment --comment keelson-cni:net1 -j MASQUERADE\n\
-A KCNI-bb -d 10.1.0.0/24 -m comment --comment keelson-cni:net1 -j ACCEPT\n\
COMMIT\n";

    #[test]
    fn chains_found_by_comment_only_for_own_network() {
        assert_eq!(chains_of(SAVE, "net1"), ["KCNI-aa", "KCNI-bb"]);
        assert_eq!(chains_of(SAVE, "net2"), ["KCNI-cc"]);
    }

    #[test]
    fn teardown_removes_jump_then_chain() {
        let text = render_teardown(SAVE, "net1", |c| c == "KCNI-aa").unwrap();
        assert_eq!(
            text,
            "*nat\n-D POSTROUTING -s 10.1.0.2/32 -m comment --comment keelson-cni:net1 -j KCNI-aa\n\
             -F KCNI-aa\n-X KCNI-aa\nCOMMIT\n"
        );
        assert!(render_teardown(SAVE, "net1", |_| false).is_none());
    }
}
