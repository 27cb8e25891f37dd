//! Session-affinity entries are learned by the kernel; when an endpoint goes away its entries
//! must go too, or clients would keep being sent to an address that no longer serves.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::ProxyModel;

/// Destination ("ip . proto . port") -> endpoints ("ip . port") that affinity may point to.
pub fn valid_targets(model: &ProxyModel) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for sp in model
        .services
        .values()
        .filter(|s| s.affinity_timeout.is_some())
    {
        let proto = sp.name.protocol.lower();
        let eps = |list: Vec<&crate::model::Endpoint>| -> BTreeSet<String> {
            list.iter()
                .map(|e| format!("{} . {}", e.ip, e.port))
                .collect()
        };
        out.insert(
            format!("{} . {proto} . {}", sp.cluster_ip, sp.port),
            eps(sp.internal_endpoints()),
        );
        let external = eps(sp.external_endpoints());
        for ip in &sp.external_ips {
            out.insert(format!("{ip} . {proto} . {}", sp.port), external.clone());
        }
        if let Some(np) = sp.node_port {
            for ip in &model.node_ips {
                out.insert(format!("{ip} . {proto} . {np}"), external.clone());
            }
        }
    }
    out
}

/// Keys of entries in `nft list map ... affinity` output that point to an endpoint no longer
/// valid for their destination.
pub fn stale_keys(listing: &str, valid: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let Some((_, body)) = listing.split_once("elements = {") else {
        return Vec::new();
    };
    let body = body.split('}').next().unwrap_or("");
    let mut out = Vec::new();
    for entry in body.split(',') {
        let entry = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some((left, target)) = entry.split_once(" : ") else {
            continue;
        };
        let parts: Vec<&str> = left.split(" . ").collect();
        let [client, ip, proto, port] = parts.as_slice() else {
            continue;
        };
        // The last part may carry "timeout 3h expires 2h59m" after the port.
        let port = port.split_whitespace().next().unwrap_or("");
        let key = format!("{client} . {ip} . {proto} . {port}");
        let dst = format!("{ip} . {proto} . {port}");
        let ok = valid
            .get(&dst)
            .is_some_and(|eps| eps.contains(target.trim()));
        if !ok {
            out.push(key);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_entries_for_removed_endpoints() {
        let listing = "table ip keelson {\n\tmap affinity {\n\t\ttype ipv4_addr . ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service\n\t\tsize 65535\n\t\tflags dynamic,timeout\n\t\ttimeout 3h\n\t\telements = { 192.168.77.2 . 10.96.0.10 . tcp . 80 expires 2h59m59s988ms : 10.244.0.2 . 8080,\n\t\t\t     192.168.77.3 . 10.96.0.10 . tcp . 80 expires 2h59m ; : 10.244.0.3 . 8080 }\n\t}\n}\n";
        let mut valid = BTreeMap::new();
        valid.insert(
            "10.96.0.10 . tcp . 80".to_string(),
            BTreeSet::from(["10.244.0.2 . 8080".to_string()]),
        );
        assert_eq!(
            stale_keys(listing, &valid),
            vec!["192.168.77.3 . 10.96.0.10 . tcp . 80".to_string()]
        );
        assert_eq!(stale_keys(listing, &BTreeMap::new()).len(), 2);
        assert!(stale_keys("table ip keelson { }", &valid).is_empty());
    }
}
