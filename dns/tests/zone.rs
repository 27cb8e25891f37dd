//! The zone's answers, from Service and EndpointSlice records, without I/O: the names the
//! Kubernetes DNS specification defines and what CoreDNS's kubernetes plugin answers.

use std::net::IpAddr;

use keelson_dns::zone::{
    Answer, EndpointEntry, PortEntry, QType, Rr, ServiceEntry, ServiceKind, SliceEntry, Zone,
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn port(name: &str, protocol: &str, port: u16) -> PortEntry {
    PortEntry {
        name: name.into(),
        protocol: protocol.into(),
        port,
    }
}

fn service(ns: &str, name: &str, kind: ServiceKind) -> ServiceEntry {
    ServiceEntry {
        namespace: ns.into(),
        name: name.into(),
        kind,
        ports: vec![port("http", "tcp", 80), port("", "udp", 53)],
        publish_not_ready: false,
    }
}

fn endpoint(addr: &str, hostname: Option<&str>, ready: bool) -> EndpointEntry {
    EndpointEntry {
        ip: ip(addr),
        hostname: hostname.map(String::from),
        ready,
        ports: vec![port("http", "tcp", 8080)],
    }
}

/// web (ClusterIP 10.96.0.20), db (headless: two ready endpoints, one with a hostname, and a
/// not-ready one), ext (ExternalName), all in `default`.
fn zone() -> Zone {
    let services = vec![
        service(
            "default",
            "web",
            ServiceKind::ClusterIp(vec![ip("10.96.0.20")]),
        ),
        service("default", "db", ServiceKind::Headless),
        service(
            "default",
            "ext",
            ServiceKind::ExternalName("example.org".into()),
        ),
    ];
    let slices = vec![
        SliceEntry {
            namespace: "default".into(),
            service: "db".into(),
            endpoints: vec![
                endpoint("10.244.0.5", Some("db-0"), true),
                endpoint("10.244.0.6", None, true),
                endpoint("10.244.0.7", None, false),
            ],
        },
        SliceEntry {
            namespace: "default".into(),
            service: "web".into(),
            endpoints: vec![endpoint("10.244.0.9", None, true)],
        },
    ];
    Zone::build("cluster.local", services, slices, 7)
}

fn answers(a: Answer) -> Vec<Rr> {
    match a {
        Answer::Records { answers, .. } => answers,
        other => panic!("expected records, got {other:?}"),
    }
}

fn a(s: &str) -> Rr {
    Rr::A(s.parse().unwrap())
}

#[test]
fn a_cluster_ip_service_resolves_to_its_cluster_ip_case_insensitively() {
    let z = zone();
    assert_eq!(
        answers(z.lookup("web.default.svc.cluster.local.", QType::A)),
        vec![a("10.96.0.20")]
    );
    assert_eq!(
        answers(z.lookup("WEB.Default.SVC.cluster.local", QType::A)),
        vec![a("10.96.0.20")]
    );
    // An IPv4-only Service has no AAAA: the name exists, so NODATA, not NXDOMAIN.
    assert_eq!(
        z.lookup("web.default.svc.cluster.local.", QType::Aaaa),
        Answer::NoData
    );
}

#[test]
fn a_headless_service_resolves_to_its_ready_endpoints_only() {
    let z = zone();
    assert_eq!(
        answers(z.lookup("db.default.svc.cluster.local.", QType::A)),
        vec![a("10.244.0.5"), a("10.244.0.6")]
    );
    let mut publishing = service("default", "db", ServiceKind::Headless);
    publishing.publish_not_ready = true;
    let slice = SliceEntry {
        namespace: "default".into(),
        service: "db".into(),
        endpoints: vec![endpoint("10.244.0.7", None, false)],
    };
    let z = Zone::build("cluster.local", vec![publishing], vec![slice], 1);
    assert_eq!(
        answers(z.lookup("db.default.svc.cluster.local.", QType::A)),
        vec![a("10.244.0.7")],
        "publishNotReadyAddresses publishes not-ready endpoints"
    );
}

#[test]
fn endpoints_of_a_headless_service_have_names_of_their_own() {
    let z = zone();
    assert_eq!(
        answers(z.lookup("db-0.db.default.svc.cluster.local.", QType::A)),
        vec![a("10.244.0.5")]
    );
    assert_eq!(
        answers(z.lookup("10-244-0-6.db.default.svc.cluster.local.", QType::A)),
        vec![a("10.244.0.6")]
    );
    assert_eq!(
        z.lookup("db-9.db.default.svc.cluster.local.", QType::A),
        Answer::NxDomain
    );
    // Not-ready endpoints are not published, and a ClusterIP Service's endpoints get no names.
    assert_eq!(
        z.lookup("10-244-0-7.db.default.svc.cluster.local.", QType::A),
        Answer::NxDomain
    );
    assert_eq!(
        z.lookup("10-244-0-9.web.default.svc.cluster.local.", QType::A),
        Answer::NxDomain
    );
}

#[test]
fn pod_names_carry_their_address() {
    let z = zone();
    assert_eq!(
        answers(z.lookup("10-244-1-7.default.pod.cluster.local.", QType::A)),
        vec![a("10.244.1.7")]
    );
    assert_eq!(
        answers(z.lookup("fd00--7.default.pod.cluster.local.", QType::Aaaa)),
        vec![Rr::Aaaa("fd00::7".parse().unwrap())]
    );
    assert_eq!(
        z.lookup("not-an-ip.default.pod.cluster.local.", QType::A),
        Answer::NxDomain
    );
}

#[test]
fn srv_for_a_named_port_points_at_the_service_or_each_endpoint() {
    let z = zone();
    let Answer::Records {
        answers,
        additional,
    } = z.lookup("_http._tcp.web.default.svc.cluster.local.", QType::Srv)
    else {
        panic!("no SRV for web");
    };
    let target = "web.default.svc.cluster.local.".to_string();
    assert_eq!(
        answers,
        vec![Rr::Srv {
            priority: 0,
            weight: 100,
            port: 80,
            target: target.clone()
        }]
    );
    assert_eq!(additional, vec![(target, a("10.96.0.20"))]);

    let headless = answers_of(z.lookup("_http._tcp.db.default.svc.cluster.local.", QType::Srv));
    assert_eq!(
        headless,
        vec![
            (8080, "db-0.db.default.svc.cluster.local.".into()),
            (8080, "10-244-0-6.db.default.svc.cluster.local.".into())
        ]
    );
    // Wrong protocol, unknown port name, unnamed port: no such name.
    for missing in ["_http._udp", "_grpc._tcp", "_._udp"] {
        let name = format!("{missing}.web.default.svc.cluster.local.");
        assert_eq!(z.lookup(&name, QType::Srv), Answer::NxDomain, "{name}");
    }
    // The Service's own name lists every port.
    let all = answers_of(z.lookup("web.default.svc.cluster.local.", QType::Srv));
    assert_eq!(
        all.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        vec![80, 53]
    );
}

fn answers_of(a: Answer) -> Vec<(u16, String)> {
    answers(a)
        .into_iter()
        .map(|rr| match rr {
            Rr::Srv { port, target, .. } => (port, target),
            other => panic!("not SRV: {other:?}"),
        })
        .collect()
}

#[test]
fn ptr_names_cluster_ips_and_headless_endpoints() {
    let z = zone();
    assert_eq!(
        answers(z.lookup("20.0.96.10.in-addr.arpa.", QType::Ptr)),
        vec![Rr::Ptr("web.default.svc.cluster.local.".into())]
    );
    assert_eq!(
        answers(z.lookup("5.0.244.10.in-addr.arpa.", QType::Ptr)),
        vec![Rr::Ptr("db-0.db.default.svc.cluster.local.".into())]
    );
    // An address nobody has is not ours to deny: refused, or forwarded with --upstream.
    assert_eq!(
        z.lookup("1.1.168.192.in-addr.arpa.", QType::Ptr),
        Answer::NotOurs
    );
}

#[test]
fn missing_names_are_nxdomain_and_existing_parents_nodata() {
    let z = zone();
    for missing in [
        "nope.default.svc.cluster.local.",
        "web.other.svc.cluster.local.",
        "other.svc.cluster.local.",
        "a.b.c.d.e.f.cluster.local.",
        "web.default.cluster.local.",
    ] {
        assert_eq!(z.lookup(missing, QType::A), Answer::NxDomain, "{missing}");
    }
    for empty in [
        "cluster.local.",
        "svc.cluster.local.",
        "default.svc.cluster.local.",
    ] {
        assert_eq!(z.lookup(empty, QType::A), Answer::NoData, "{empty}");
    }
    assert_eq!(
        answers(z.lookup("cluster.local.", QType::Soa)),
        vec![Rr::Soa]
    );
}

#[test]
fn external_name_is_a_cname_for_every_type() {
    let z = zone();
    for t in [QType::A, QType::Aaaa, QType::Srv] {
        assert_eq!(
            answers(z.lookup("ext.default.svc.cluster.local.", t)),
            vec![Rr::Cname("example.org.".into())]
        );
    }
}

#[test]
fn names_outside_the_cluster_domain_are_not_ours() {
    let z = zone();
    for outside in [
        "example.org.",
        "local.",
        "cluster.local.example.org.",
        "xcluster.local.",
    ] {
        assert_eq!(z.lookup(outside, QType::A), Answer::NotOurs, "{outside}");
    }
    let other = Zone::build("corp.example", vec![], vec![], 1);
    assert_eq!(
        other.lookup("web.default.svc.cluster.local.", QType::A),
        Answer::NotOurs,
        "--cluster-domain decides the zone"
    );
}
