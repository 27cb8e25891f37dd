//! The real keelson-dns binary against a real keelson-apiserver, as its own identity
//! (system:kube-dns, what the bootstrap policy grants it), on a loopback port: objects made
//! with kubectl are answered over UDP and TCP as CoreDNS's kubernetes plugin answers them.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::{http_get, ips, start_dns, tcp, udp, Dns};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use keelson_testing::{eventually, Apiserver};

const WAIT: Duration = Duration::from_secs(30);

/// Waits until `name` resolves (A) to exactly `want`.
fn resolves_to(dns: &Dns, name: &str, want: &[&str]) {
    let want: Vec<IpAddr> = want.iter().map(|s| s.parse().unwrap()).collect();
    eventually(&format!("{name} -> {want:?}"), WAIT, || {
        let m = udp(dns, name, RecordType::A)?;
        let got = ips(&m);
        if m.response_code() == ResponseCode::NoError && got == want && m.authoritative() {
            Ok(())
        } else {
            Err(format!("{:?} {got:?}", m.response_code()))
        }
    });
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.100.20
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: pg, port: 5432}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: default, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: pg, port: 5432, protocol: TCP}]
endpoints:
- {addresses: ["10.244.0.5"], hostname: db-0, conditions: {ready: true}}
- {addresses: ["10.244.0.6"], conditions: {ready: true}}
- {addresses: ["10.244.0.7"], conditions: {ready: false}}
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: default}
spec: {type: ExternalName, externalName: example.org}
"#;

#[test]
fn answers_services_and_endpoint_slices_from_its_watch() {
    let api = Apiserver::start();
    let mut dns = start_dns(&api, &[]);
    api.apply(OBJECTS);

    resolves_to(&dns, "web.default.svc.cluster.local.", &["10.96.100.20"]);
    resolves_to(&dns, "WEB.default.svc.Cluster.Local.", &["10.96.100.20"]);
    // Headless: the ready endpoints only; an endpoint's hostname is a name of its own.
    resolves_to(
        &dns,
        "db.default.svc.cluster.local.",
        &["10.244.0.5", "10.244.0.6"],
    );
    resolves_to(&dns, "db-0.db.default.svc.cluster.local.", &["10.244.0.5"]);
    resolves_to(
        &dns,
        "10-244-3-4.default.pod.cluster.local.",
        &["10.244.3.4"],
    );

    let srv = udp(
        &dns,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    )
    .unwrap();
    let RData::SRV(s) = srv.answers()[0].data() else {
        panic!("not SRV: {srv:?}");
    };
    assert_eq!(
        (s.port(), s.target().to_ascii()),
        (80, "web.default.svc.cluster.local.".into())
    );
    assert_eq!(
        ips_of_additional(&srv),
        vec!["10.96.100.20".parse::<IpAddr>().unwrap()]
    );
    // The same over TCP, for the headless Service: one SRV per ready endpoint.
    let srv = tcp(
        &dns,
        "_pg._tcp.db.default.svc.cluster.local.",
        RecordType::SRV,
    );
    let mut targets: Vec<String> = srv
        .answers()
        .iter()
        .map(|r| match r.data() {
            RData::SRV(s) => format!("{}:{}", s.target(), s.port()),
            other => panic!("not SRV: {other:?}"),
        })
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        vec![
            "10-244-0-6.db.default.svc.cluster.local.:5432",
            "db-0.db.default.svc.cluster.local.:5432"
        ]
    );

    let ptr = udp(&dns, "20.100.96.10.in-addr.arpa.", RecordType::PTR).unwrap();
    let RData::PTR(p) = ptr.answers()[0].data() else {
        panic!("not PTR: {ptr:?}");
    };
    assert_eq!(p.0.to_ascii(), "web.default.svc.cluster.local.");

    // The ExternalName Service came last in the same apply: waited for too.
    eventually("ext as a CNAME", WAIT, || {
        let m = udp(&dns, "ext.default.svc.cluster.local.", RecordType::A)?;
        match m.answers().first().map(|r| r.data()) {
            Some(RData::CNAME(c)) if c.0.to_ascii() == "example.org." => Ok(()),
            other => Err(format!("{:?} {other:?}", m.response_code())),
        }
    });

    assert_nxdomain_with_soa(&dns, "nope.default.svc.cluster.local.");
    // Outside the cluster domain, without --upstream: refused, nothing forwarded.
    let out = udp(&dns, "example.com.", RecordType::A).unwrap();
    assert_eq!(out.response_code(), ResponseCode::Refused);
    assert!(out.answers().is_empty());

    // A change is seen: the Service goes, its name goes; the slice grows, the headless name too.
    api.kubectl_ok(&["delete", "service", "web"]);
    eventually("web gone", WAIT, || {
        let m = udp(&dns, "web.default.svc.cluster.local.", RecordType::A)?;
        (m.response_code() == ResponseCode::NXDomain)
            .then_some(())
            .ok_or("still there".to_string())
    });
    api.kubectl_ok(&[
        "patch",
        "endpointslice",
        "db-1",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/endpoints/2/conditions/ready","value":true}]"#,
    ]);
    resolves_to(
        &dns,
        "db.default.svc.cluster.local.",
        &["10.244.0.5", "10.244.0.6", "10.244.0.7"],
    );

    let (status, body) = http_get(dns.health, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("keelson_dns_responses_total{rcode=\"NXDOMAIN\"}"),
        "{body}"
    );
    // SIGTERM stops it cleanly.
    let status = dns.child.terminate(Duration::from_secs(5));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

fn ips_of_additional(m: &Message) -> Vec<IpAddr> {
    m.additionals()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect()
}

fn assert_nxdomain_with_soa(dns: &Dns, name: &str) {
    let m = udp(dns, name, RecordType::A).unwrap();
    assert_eq!(m.response_code(), ResponseCode::NXDomain, "{name}");
    assert!(m.authoritative());
    let soa = m.name_servers().first().expect("the SOA in authority");
    assert_eq!(soa.name().to_ascii(), "cluster.local.");
    let RData::SOA(s) = soa.data() else {
        panic!("not SOA: {soa:?}");
    };
    assert_eq!(s.mname().to_ascii(), "ns.dns.cluster.local.");
    assert_eq!(s.rname().to_ascii(), "hostmaster.cluster.local.");
    assert_eq!(s.minimum(), 30);
}

/// busybox's nslookup, the client of the e2e checks' pods, reads the answers as expected:
/// what scripts/e2e.d/dns.bash greps for.
#[test]
fn busybox_nslookup_reads_the_answers() {
    keelson_testing::require_tools(&["busybox"]);
    let api = Apiserver::start();
    let dns = start_dns(&api, &[]);
    api.apply(OBJECTS);
    resolves_to(
        &dns,
        "db.default.svc.cluster.local.",
        &["10.244.0.5", "10.244.0.6"],
    );
    let server = dns.addr.to_string();
    let nslookup = |args: &[&str]| {
        let out = std::process::Command::new("busybox")
            .arg("nslookup")
            .args(args)
            .arg(&server)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (rc, out) = nslookup(&["web.default.svc.cluster.local"]);
    assert_eq!(rc, Some(0), "{out}");
    assert!(
        out.contains("Name:\tweb.default.svc.cluster.local"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "Address: 10.96.100.20"), "{out}");

    let (_, out) = nslookup(&["db.default.svc.cluster.local"]);
    for ip in ["10.244.0.5", "10.244.0.6"] {
        assert!(out.lines().any(|l| l == format!("Address: {ip}")), "{out}");
    }
    let (_, out) = nslookup(&["-type=SRV", "_http._tcp.web.default.svc.cluster.local"]);
    assert!(
        out.contains("service = 0 100 80 web.default.svc.cluster.local"),
        "{out}"
    );
    let (rc, out) = nslookup(&["outside.example."]);
    assert_eq!(rc, Some(1), "{out}");
    assert!(out.contains("REFUSED"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("Address: 1")), "{out}");
}
