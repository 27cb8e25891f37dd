//! Where names outside the cluster go, as CoreDNS's forward plugin takes them: addresses
//! (`10.0.0.2`, `10.0.0.2:5353`, `[fd00::2]:53`) or a resolv.conf whose `nameserver` lines
//! are read (`/etc/resolv.conf`: the node's resolvers). Pure, but for reading the file.

use std::net::{IpAddr, SocketAddr};

/// The upstreams named by `--upstream` items, in order, without duplicates and without
/// `own` (this server's listen address: forwarding to it would loop).
pub fn upstreams(items: &[String], own: SocketAddr) -> Result<Vec<SocketAddr>, String> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let found = if item.starts_with('/') {
            let text =
                std::fs::read_to_string(item).map_err(|e| format!("--upstream {item}: {e}"))?;
            let servers = nameservers(&text);
            if servers.is_empty() {
                return Err(format!("--upstream {item}: no nameserver line"));
            }
            servers
        } else {
            vec![address(item)?]
        };
        for s in found {
            if s != own && !out.contains(&s) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// `ADDR` (port 53) or `ADDR:PORT`, IPv6 in brackets with a port.
fn address(item: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = item.parse::<SocketAddr>() {
        return Ok(addr);
    }
    item.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| {
            format!("invalid --upstream {item:?}: want ADDR, ADDR:PORT or a resolv.conf path")
        })
}

/// The `nameserver` addresses of a resolv.conf, port 53 (an IPv6 zone such as `%eth0` is
/// dropped; comments and other lines are skipped, as the resolver does).
pub fn nameservers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            let addr = words.next()?;
            let addr = addr.split('%').next()?;
            addr.parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, 53))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameserver_lines_as_the_resolver_reads_them() {
        let text = "# generated\nsearch example.test\nnameserver 192.0.2.53\n; note\nnameserver fe80::1%eth0\nnameserver not-an-ip\noptions ndots:2\n  nameserver 198.51.100.1 # trailing\n";
        let got = nameservers(text);
        let want: Vec<SocketAddr> = vec![
            "192.0.2.53:53".parse().unwrap(),
            "[fe80::1]:53".parse().unwrap(),
            "198.51.100.1:53".parse().unwrap(),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn addresses_with_and_without_ports_and_no_loop_to_ourselves() {
        let own: SocketAddr = "10.244.0.1:53".parse().unwrap();
        let items = [
            "192.0.2.1".to_string(),
            "192.0.2.2:5353".into(),
            "[2001:db8::1]:53".into(),
            "10.244.0.1".into(),
            "192.0.2.1:53".into(),
        ];
        let got = upstreams(&items, own).unwrap();
        let want: Vec<SocketAddr> = ["192.0.2.1:53", "192.0.2.2:5353", "[2001:db8::1]:53"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        let e = upstreams(&["dns.example".to_string()], own).unwrap_err();
        assert!(e.contains("\"dns.example\""), "{e}");
        let e = upstreams(&["/nonexistent/resolv.conf".to_string()], own).unwrap_err();
        assert!(e.contains("/nonexistent/resolv.conf"), "{e}");
    }
}
