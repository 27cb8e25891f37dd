//! Requests to responses without sockets: the header bits, the sections, and the cases that
//! are not a plain answer (before the first list, bad requests, truncation over UDP).

use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use keelson_dns::wire::{self, Handled};
use keelson_dns::zone::{EndpointEntry, PortEntry, ServiceEntry, ServiceKind, SliceEntry, Zone};

fn request(name: &str, t: RecordType) -> Message {
    let mut m = Message::new();
    m.set_id(4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    m
}

/// Service `big` (headless) with `n` ready endpoints; `web` with ClusterIP 10.96.0.20.
fn zone(n: u8) -> Arc<Zone> {
    let svc = |name: &str, kind| ServiceEntry {
        namespace: "default".into(),
        name: name.into(),
        kind,
        ports: vec![PortEntry {
            name: "http".into(),
            protocol: "tcp".into(),
            port: 80,
        }],
        publish_not_ready: false,
    };
    let endpoints = (1..=n)
        .map(|i| EndpointEntry {
            ip: format!("10.244.0.{i}").parse().unwrap(),
            hostname: None,
            ready: true,
            ports: vec![],
        })
        .collect();
    let slice = SliceEntry {
        namespace: "default".into(),
        service: "big".into(),
        endpoints,
    };
    Arc::new(Zone::build(
        "cluster.local",
        vec![
            svc("big", ServiceKind::Headless),
            svc(
                "web",
                ServiceKind::ClusterIp(vec!["10.96.0.20".parse().unwrap()]),
            ),
        ],
        vec![slice],
        9,
    ))
}

fn reply(zone: Option<&Arc<Zone>>, forwarding: bool, req: &Message) -> Message {
    match wire::handle(zone, 30, forwarding, req) {
        Handled::Reply(m) => m,
        Handled::Forward => panic!("forwarded"),
    }
}

#[test]
fn an_answer_keeps_the_id_question_and_rd_and_is_authoritative_without_recursion() {
    let z = zone(1);
    let req = request("web.default.svc.cluster.local.", RecordType::A);
    let m = reply(Some(&z), false, &req);
    assert_eq!(m.id(), 4242);
    assert_eq!(m.message_type(), MessageType::Response);
    assert_eq!(m.queries(), req.queries());
    assert!(m.recursion_desired() && m.authoritative() && !m.recursion_available());
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.answers()[0].ttl(), 30);
    assert!(matches!(m.answers()[0].data(), RData::A(a) if a.0.to_string() == "10.96.0.20"));
    // Through the wire format and back.
    let bytes = wire::encode(&m, Some(512)).unwrap();
    assert_eq!(Message::from_vec(&bytes).unwrap().answers(), m.answers());
}

#[test]
fn nodata_is_noerror_with_the_soa_and_its_serial() {
    let z = zone(1);
    let m = reply(
        Some(&z),
        false,
        &request("web.default.svc.cluster.local.", RecordType::AAAA),
    );
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
    let RData::SOA(soa) = m.name_servers()[0].data() else {
        panic!("no SOA: {m:?}");
    };
    assert_eq!(soa.serial(), 9);
}

#[test]
fn before_the_first_list_every_answer_is_servfail() {
    let m = reply(
        None,
        false,
        &request("web.default.svc.cluster.local.", RecordType::A),
    );
    assert_eq!(m.response_code(), ResponseCode::ServFail);
}

#[test]
fn outside_the_zone_is_refused_or_forwarded_with_an_upstream() {
    let z = zone(1);
    let req = request("example.com.", RecordType::A);
    assert_eq!(
        reply(Some(&z), false, &req).response_code(),
        ResponseCode::Refused
    );
    assert!(matches!(
        wire::handle(Some(&z), 30, true, &req),
        Handled::Forward
    ));
}

#[test]
fn other_opcodes_are_not_implemented_and_garbage_is_a_format_error() {
    let z = zone(1);
    let mut req = request("web.default.svc.cluster.local.", RecordType::A);
    req.set_op_code(OpCode::Update);
    assert_eq!(
        reply(Some(&z), false, &req).response_code(),
        ResponseCode::NotImp
    );
    let err = wire::format_error(&[0x12, 0x34, 0xff]).unwrap();
    assert_eq!(
        (err.id(), err.response_code()),
        (0x1234, ResponseCode::FormErr)
    );
    assert!(
        wire::format_error(&[1]).is_none(),
        "no id: nothing to answer"
    );
}

#[test]
fn a_long_answer_is_truncated_over_udp_unless_edns_allows_it() {
    let z = zone(60);
    let req = request("big.default.svc.cluster.local.", RecordType::A);
    let m = reply(Some(&z), false, &req);
    assert_eq!(m.answers().len(), 60);
    let udp = Message::from_vec(&wire::encode(&m, Some(wire::udp_limit(&req))).unwrap()).unwrap();
    assert!(
        udp.truncated() && udp.answers().is_empty(),
        "TC: ask again over TCP"
    );
    let tcp = Message::from_vec(&wire::encode(&m, None).unwrap()).unwrap();
    assert_eq!(tcp.answers().len(), 60);

    let mut edns_req = req.clone();
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    edns_req.set_edns(edns);
    assert_eq!(wire::udp_limit(&edns_req), 1232, "capped at ours");
    let m = reply(Some(&z), false, &edns_req);
    let udp =
        Message::from_vec(&wire::encode(&m, Some(wire::udp_limit(&edns_req))).unwrap()).unwrap();
    assert!(!udp.truncated());
    assert_eq!(udp.answers().len(), 60);
}
