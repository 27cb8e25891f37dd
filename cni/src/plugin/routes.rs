//! Which routes go into the container, and which the result reports (pure).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::{IpNetwork, Ipv4Network, Ipv6Network};

use crate::result::{IpConfig, Route};

// Built at compile time: a /0 prefix is valid in both families, so these cannot fail at run time.
const ANY_V4: Ipv4Network = match Ipv4Network::new_checked(Ipv4Addr::UNSPECIFIED, 0) {
    Some(net) => net,
    None => panic!("0.0.0.0/0 is valid"),
};
const ANY_V6: Ipv6Network = match Ipv6Network::new_checked(Ipv6Addr::UNSPECIFIED, 0) {
    Some(net) => net,
    None => panic!("::/0 is valid"),
};

fn default_of(v4: bool) -> IpNetwork {
    if v4 {
        IpNetwork::V4(ANY_V4)
    } else {
        IpNetwork::V6(ANY_V6)
    }
}

fn gateway_for(ips: &[IpConfig], v4: bool) -> Option<IpAddr> {
    ips.iter()
        .filter(|ip| ip.address.is_ipv4() == v4)
        .find_map(|ip| ip.gateway)
}

/// Routes for the result: IPAM's as given, plus a default route via the gateway per family
/// when `isDefaultGateway` (replacing IPAM's own default for that family).
pub fn result_routes(ipam_routes: &[Route], ips: &[IpConfig], default_gw: bool) -> Vec<Route> {
    let mut out: Vec<Route> = Vec::new();
    let families: Vec<bool> = [true, false]
        .into_iter()
        .filter(|v4| default_gw && gateway_for(ips, *v4).is_some())
        .collect();
    for r in ipam_routes {
        let is_default = r.dst.prefix() == 0;
        if is_default && families.contains(&r.dst.is_ipv4()) {
            continue;
        }
        out.push(r.clone());
    }
    for v4 in families {
        out.push(Route {
            dst: default_of(v4),
            gw: gateway_for(ips, v4),
        });
    }
    out
}

/// Routes as installed in the kernel: a route without a gateway goes via the gateway of
/// its family (as the reference plugin does); when none exists it is on-link.
pub fn kernel_routes(
    result_routes: &[Route],
    ips: &[IpConfig],
) -> Vec<(IpNetwork, Option<IpAddr>)> {
    result_routes
        .iter()
        .filter(|r| ips.iter().any(|ip| ip.address.is_ipv4() == r.dst.is_ipv4()))
        .map(|r| (r.dst, r.gw.or_else(|| gateway_for(ips, r.dst.is_ipv4()))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(addr: &str, gw: &str) -> IpConfig {
        IpConfig {
            interface: Some(2),
            address: addr.parse().unwrap(),
            gateway: Some(gw.parse().unwrap()),
            version: None,
        }
    }

    fn route(dst: &str, gw: Option<&str>) -> Route {
        Route {
            dst: dst.parse().unwrap(),
            gw: gw.map(|g| g.parse().unwrap()),
        }
    }

    #[test]
    fn ipam_default_route_goes_via_gateway() {
        let ips = [ip("10.1.0.2/24", "10.1.0.1")];
        let rr = result_routes(&[route("0.0.0.0/0", None)], &ips, false);
        assert_eq!(rr, [route("0.0.0.0/0", None)]);
        let kr = kernel_routes(&rr, &ips);
        assert_eq!(
            kr,
            [(
                "0.0.0.0/0".parse().unwrap(),
                Some("10.1.0.1".parse().unwrap())
            )]
        );
    }

    #[test]
    fn default_gateway_replaces_ipam_default() {
        let ips = [ip("10.1.0.2/24", "10.1.0.1")];
        let rr = result_routes(
            &[
                route("0.0.0.0/0", None),
                route("192.168.0.0/16", Some("10.1.0.9")),
            ],
            &ips,
            true,
        );
        assert_eq!(
            rr,
            [
                route("192.168.0.0/16", Some("10.1.0.9")),
                route("0.0.0.0/0", Some("10.1.0.1"))
            ]
        );
    }

    #[test]
    fn routes_of_a_family_without_address_are_skipped() {
        let ips = [ip("10.1.0.2/24", "10.1.0.1")];
        assert!(kernel_routes(&[route("::/0", None)], &ips).is_empty());
    }
}
