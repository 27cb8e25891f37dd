//! A small synchronous rtnetlink client: one request at a time, answered before the next.
//! Synchronous on purpose: a CNI plugin makes a handful of requests and exits, so an async
//! runtime would only add start-up time. The node agent uses the same client for its routes,
//! neighbour and FDB entries and vxlan device.

// No panic reachable from the kernel's answers: both users are node daemons or plugins.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod addr;
pub mod link;
pub mod neigh;
pub mod route;

use std::io;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// A route netlink socket bound to the network namespace it was opened in.
pub struct Netlink {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    pub fn open() -> io::Result<Netlink> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        // Extended acks give kernel messages such as "File exists" more context; optional.
        let _ = socket.set_ext_ack(true);
        Ok(Netlink {
            socket,
            seq: 0,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        packet.finalize();
        let mut bytes = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;
        Ok(self.seq)
    }

    /// Reads replies to `seq`, handing each inner message to `each`; stops at the ack, error,
    /// or end of dump.
    fn receive(
        &mut self,
        seq: u32,
        mut each: impl FnMut(RouteNetlinkMessage),
        single: bool,
    ) -> io::Result<()> {
        loop {
            self.buf.clear();
            let n = self.socket.recv(&mut self.buf, 0)?;
            let data = self.buf.get(..n).unwrap_or(self.buf.as_slice());
            let mut offset = 0;
            while let Some(rest) = data.get(offset..).filter(|rest| !rest.is_empty()) {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = msg.header.length as usize;
                if len == 0 {
                    break;
                }
                offset = offset.saturating_add(len.saturating_add(3) & !3);
                if msg.header.sequence_number != seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(()),
                            Some(_) => Err(e.to_io()),
                        };
                    }
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::InnerMessage(inner) => {
                        each(inner);
                        if single {
                            return Ok(());
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Sends a change and waits for the kernel's acknowledgement.
    pub fn request(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        let seq = self.send(msg, NLM_F_ACK | flags)?;
        self.receive(seq, |_| {}, false)
    }

    /// Sends a get for one object and returns the answer.
    pub fn get(&mut self, msg: RouteNetlinkMessage) -> io::Result<RouteNetlinkMessage> {
        let seq = self.send(msg, 0)?;
        let mut out = None;
        self.receive(seq, |m| out = Some(m), true)?;
        out.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no netlink answer"))
    }

    /// Dumps a table (links, addresses, routes).
    pub fn dump(&mut self, msg: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        let seq = self.send(msg, NLM_F_DUMP)?;
        let mut out = Vec::new();
        self.receive(seq, |m| out.push(m), false)?;
        Ok(out)
    }
}

pub fn is_exists(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EEXIST)
}

pub fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENODEV) | Some(libc::ESRCH) | Some(libc::ENOENT)
    )
}

/// Treats EEXIST as done: adding what is already there (a parallel ADD's bridge, an address
/// set before) is not a failure.
pub fn ignore_exists(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if is_exists(&e) => Ok(()),
        other => other,
    }
}
