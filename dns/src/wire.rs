//! DNS messages in and out: a request becomes a response from the zone (or "forward it").
//! Pure: no sockets here.

use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use crate::zone::{Answer, QType, Rr, Zone, SOA_EXPIRE, SOA_REFRESH, SOA_RETRY};

/// The largest UDP response we send when the client offers more (EDNS), as DNS Flag Day 2020.
pub const MAX_UDP_PAYLOAD: u16 = 1232;

/// What to do with a request.
#[derive(Debug)]
pub enum Handled {
    Reply(Message),
    /// Outside the cluster's zones and an upstream is configured: pass it on as it is.
    Forward,
}

/// Answers `request` from `zone` (None until the first list of Services and EndpointSlices:
/// SERVFAIL then, so clients retry rather than cache a wrong NXDOMAIN).
pub fn handle(zone: Option<&Arc<Zone>>, ttl: u32, forwarding: bool, request: &Message) -> Handled {
    let mut resp = response_to(request);
    if request.message_type() != MessageType::Query || request.op_code() != OpCode::Query {
        resp.set_response_code(ResponseCode::NotImp);
        return Handled::Reply(resp);
    }
    let [query] = request.queries() else {
        resp.set_response_code(ResponseCode::FormErr);
        return Handled::Reply(resp);
    };
    let Some(zone) = zone else {
        resp.set_response_code(ResponseCode::ServFail);
        return Handled::Reply(resp);
    };
    let answer = if query.query_class() == DNSClass::IN {
        zone.lookup(&query.name().to_ascii(), qtype(query.query_type()))
    } else {
        Answer::NotOurs
    };
    let qname = query.name().clone();
    match answer {
        Answer::NotOurs if forwarding => return Handled::Forward,
        Answer::NotOurs => {
            resp.set_response_code(ResponseCode::Refused);
        }
        Answer::Records {
            answers,
            additional,
        } => {
            resp.set_authoritative(true);
            for rr in answers {
                resp.add_answer(record(zone, &qname, ttl, rr));
            }
            for (owner, rr) in additional {
                if let Ok(owner) = Name::from_ascii(&owner) {
                    resp.add_additional(record(zone, &owner, ttl, rr));
                }
            }
        }
        Answer::NoData | Answer::NxDomain => {
            resp.set_authoritative(true);
            if answer == Answer::NxDomain {
                resp.set_response_code(ResponseCode::NXDomain);
            }
            if let Ok(apex) = Name::from_ascii(zone.apex()) {
                resp.add_name_server(record(zone, &apex, ttl, Rr::Soa));
            }
        }
    }
    Handled::Reply(resp)
}

/// The response skeleton: same id, question and RD bit; EDNS answered when asked.
fn response_to(request: &Message) -> Message {
    let mut resp = Message::new();
    resp.set_id(request.id())
        .set_message_type(MessageType::Response)
        .set_op_code(request.op_code())
        .set_recursion_desired(request.recursion_desired())
        .add_queries(request.queries().iter().cloned());
    if request.extensions().is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(MAX_UDP_PAYLOAD);
        resp.set_edns(edns);
    }
    resp
}

/// A FORMERR for bytes that are not a DNS message but carry an id; None when not even that.
pub fn format_error(request: &[u8]) -> Option<Message> {
    let id = u16::from_be_bytes([*request.first()?, *request.get(1)?]);
    let mut resp = Message::new();
    resp.set_id(id)
        .set_message_type(MessageType::Response)
        .set_response_code(ResponseCode::FormErr);
    Some(resp)
}

/// The wire bytes; over UDP, a response longer than `limit` is sent truncated (TC set, no
/// records), so the client asks again over TCP.
pub fn encode(resp: &Message, limit: Option<usize>) -> Option<Vec<u8>> {
    let bytes = resp.to_vec().ok()?;
    match limit {
        Some(limit) if bytes.len() > limit => resp.truncate().to_vec().ok(),
        _ => Some(bytes),
    }
}

/// The UDP size the client accepts: 512 without EDNS, its EDNS size capped at ours.
pub fn udp_limit(request: &Message) -> usize {
    match request.extensions() {
        Some(e) => usize::from(e.max_payload().clamp(512, MAX_UDP_PAYLOAD)),
        None => 512,
    }
}

fn qtype(t: RecordType) -> QType {
    match t {
        RecordType::A => QType::A,
        RecordType::AAAA => QType::Aaaa,
        RecordType::SRV => QType::Srv,
        RecordType::PTR => QType::Ptr,
        RecordType::SOA => QType::Soa,
        RecordType::NS => QType::Ns,
        _ => QType::Other,
    }
}

fn name(s: &str) -> Name {
    // The zone builds its names from validated Kubernetes names; a bad one becomes the root
    // rather than failing the whole answer.
    Name::from_ascii(s).unwrap_or_else(|_| Name::root())
}

fn record(zone: &Zone, owner: &Name, ttl: u32, rr: Rr) -> Record {
    let rdata = match rr {
        Rr::A(ip) => RData::A(A(ip)),
        Rr::Aaaa(ip) => RData::AAAA(AAAA(ip)),
        Rr::Srv {
            priority,
            weight,
            port,
            target,
        } => RData::SRV(SRV::new(priority, weight, port, name(&target))),
        Rr::Ptr(target) => RData::PTR(PTR(name(&target))),
        Rr::Cname(target) => RData::CNAME(CNAME(name(&target))),
        Rr::Ns(target) => RData::NS(NS(name(&target))),
        Rr::Soa => RData::SOA(SOA::new(
            name(&zone.ns_name()),
            name(&zone.hostmaster()),
            zone.serial,
            SOA_REFRESH,
            SOA_RETRY,
            SOA_EXPIRE,
            ttl,
        )),
    };
    Record::from_rdata(owner.clone(), ttl, rdata)
}
