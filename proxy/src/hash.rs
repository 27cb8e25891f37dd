//! kube-proxy's chain names: a prefix plus the first 16 base32 characters of the SHA-256 of
//! "namespace/name:port" + lower-case protocol (+ "ip:port" for endpoints),
//! so operators find the same names in `iptables-save` as with kube-proxy.

use data_encoding::BASE32;
use ring::digest::{digest, SHA256};

use crate::model::{Endpoint, ServicePortName};

fn hash16(input: &str) -> String {
    let sum = digest(&SHA256, input.as_bytes());
    BASE32.encode(sum.as_ref())[..16].to_string()
}

fn port_proto_hash(spn: &ServicePortName) -> String {
    hash16(&format!("{}{}", spn, spn.protocol.lower()))
}

/// KUBE-SVC-<hash>: the cluster-wide endpoint chain of a service port.
pub fn svc_chain(spn: &ServicePortName) -> String {
    format!("KUBE-SVC-{}", port_proto_hash(spn))
}

/// KUBE-SVL-<hash>: the node-local endpoint chain (traffic policy Local).
pub fn svl_chain(spn: &ServicePortName) -> String {
    format!("KUBE-SVL-{}", port_proto_hash(spn))
}

/// KUBE-EXT-<hash>: entry for NodePort and external-IP traffic.
pub fn ext_chain(spn: &ServicePortName) -> String {
    format!("KUBE-EXT-{}", port_proto_hash(spn))
}

/// KUBE-SEP-<hash>: one endpoint of a service port.
pub fn sep_chain(spn: &ServicePortName, ep: &Endpoint) -> String {
    let input = format!("{}{}{}", spn, spn.protocol.lower(), ep.addr());
    format!("KUBE-SEP-{}", hash16(&input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Protocol;

    fn spn(ns: &str, name: &str, port: &str, protocol: Protocol) -> ServicePortName {
        ServicePortName {
            namespace: ns.into(),
            name: name.into(),
            port_name: port.into(),
            protocol,
        }
    }

    #[test]
    fn names_match_kube_proxy() {
        // Chain names every kube-proxy cluster shows in iptables-save.
        let https = spn("default", "kubernetes", "https", Protocol::Tcp);
        assert_eq!(svc_chain(&https), "KUBE-SVC-NPX46M4PTMTKRN6Y");
        let dns = spn("kube-system", "kube-dns", "dns", Protocol::Udp);
        assert_eq!(svc_chain(&dns), "KUBE-SVC-TCOU7JCQXEZGVUNU");
        let dns_tcp = spn("kube-system", "kube-dns", "dns-tcp", Protocol::Tcp);
        assert_eq!(svc_chain(&dns_tcp), "KUBE-SVC-ERIFXISQEP7F7OF4");
        // An unnamed port hashes "namespace/name" alone.
        let nginx = spn("default", "nginx", "", Protocol::Tcp);
        assert_eq!(svc_chain(&nginx), "KUBE-SVC-2CMXP7HKUVJN7L6M");
        assert_eq!(ext_chain(&https), "KUBE-EXT-NPX46M4PTMTKRN6Y");
    }

    #[test]
    fn names_differ_by_protocol_and_port() {
        let tcp = spn("ns1", "svc1", "p80", Protocol::Tcp);
        let udp = spn("ns1", "svc1", "p80", Protocol::Udp);
        assert_ne!(svc_chain(&tcp), svc_chain(&udp));
        assert_ne!(
            svc_chain(&tcp),
            svc_chain(&spn("ns1", "svc1", "p81", Protocol::Tcp))
        );
        assert_eq!(svc_chain(&tcp).len(), "KUBE-SVC-".len() + 16);
        let ep = Endpoint {
            ip: "10.180.0.1".parse().unwrap(),
            port: 80,
            ready: true,
            serving: true,
            terminating: false,
            local: false,
        };
        let other = Endpoint {
            port: 81,
            ..ep.clone()
        };
        assert_ne!(sep_chain(&tcp, &ep), sep_chain(&tcp, &other));
    }
}
