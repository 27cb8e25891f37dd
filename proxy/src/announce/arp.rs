//! ARP on the announcing interface: answers requests for the addresses this node announces and
//! sends gratuitous ARP when it takes one over, so the segment's neighbour caches move at once.
//! Frames are built and parsed by pure functions; the socket (AF_PACKET) is the only I/O.

use std::collections::BTreeSet;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::cidr::Ipv4Cidr;

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IP: u16 = 0x0800;
const BROADCAST: [u8; 6] = [0xff; 6];
/// Ethernet header (14) and an IPv4-over-Ethernet ARP body (28).
const FRAME_LEN: usize = 42;
const REQUEST: u16 = 1;
const REPLY: u16 = 2;

pub type Mac = [u8; 6];

/// An ARP request for `target`, from `sender_ip` at `sender_mac`.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub sender_mac: Mac,
    pub sender_ip: Ipv4Addr,
    pub target: Ipv4Addr,
}

/// The request in an Ethernet frame, if it is one (IPv4 over Ethernet).
pub fn parse_request(frame: &[u8]) -> Option<Request> {
    let f = frame.get(..FRAME_LEN)?;
    let u16_at = |i: usize| Some(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?]));
    let ip_at = |i: usize| -> Option<Ipv4Addr> {
        let b: [u8; 4] = f.get(i..i + 4)?.try_into().ok()?;
        Some(Ipv4Addr::from(b))
    };
    let ok = u16_at(12)? == ETH_P_ARP
        && u16_at(14)? == 1
        && u16_at(16)? == ETH_P_IP
        && f.get(18..20)? == [6, 4]
        && u16_at(20)? == REQUEST;
    ok.then_some(())?;
    Some(Request {
        sender_mac: f.get(22..28)?.try_into().ok()?,
        sender_ip: ip_at(28)?,
        target: ip_at(38)?,
    })
}

fn frame(dst: Mac, op: u16, sha: Mac, spa: Ipv4Addr, tha: Mac, tpa: Ipv4Addr) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    let parts: [&[u8]; 11] = [
        &dst,
        &sha,
        &ETH_P_ARP.to_be_bytes(),
        &1u16.to_be_bytes(),
        &ETH_P_IP.to_be_bytes(),
        &[6, 4],
        &op.to_be_bytes(),
        &sha,
        &spa.octets(),
        &tha,
        &tpa.octets(),
    ];
    let mut at = 0;
    for p in parts {
        if let Some(slot) = f.get_mut(at..at + p.len()) {
            slot.copy_from_slice(p);
        }
        at += p.len();
    }
    f
}

/// The reply to `req`: `req.target` is at `mac`.
pub fn reply(req: &Request, mac: Mac) -> [u8; FRAME_LEN] {
    frame(
        req.sender_mac,
        REPLY,
        mac,
        req.target,
        req.sender_mac,
        req.sender_ip,
    )
}

/// Gratuitous ARP for `ip` at `mac`, in both forms hosts accept (a broadcast request and a
/// broadcast reply, each naming the address as sender and target).
pub fn gratuitous(ip: Ipv4Addr, mac: Mac) -> [[u8; FRAME_LEN]; 2] {
    [
        frame(BROADCAST, REQUEST, mac, ip, [0; 6], ip),
        frame(BROADCAST, REPLY, mac, ip, BROADCAST, ip),
    ]
}

/// The interface addresses are announced on.
#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub index: i32,
    pub mac: Mac,
    /// Its IPv4 networks (address and mask).
    pub networks: Vec<Ipv4Cidr>,
}

/// The interface named `name`, or else the one holding one of `node_ips`.
pub fn find_link(name: Option<&str>, node_ips: &[Ipv4Addr]) -> io::Result<Link> {
    let mut links: Vec<(Link, Vec<Ipv4Addr>)> = Vec::new();
    // SAFETY: getifaddrs fills a list freed below; every pointer is checked before it is read
    // and nothing is kept past freeifaddrs.
    unsafe {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut head) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cur = head;
        while !cur.is_null() {
            let ifa = &*cur;
            cur = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
                continue;
            }
            let ifname = std::ffi::CStr::from_ptr(ifa.ifa_name)
                .to_string_lossy()
                .into_owned();
            let pos = match links.iter().position(|(l, _)| l.name == ifname) {
                Some(p) => p,
                None => {
                    let link = Link {
                        name: ifname,
                        index: 0,
                        mac: [0; 6],
                        networks: Vec::new(),
                    };
                    links.push((link, Vec::new()));
                    links.len() - 1
                }
            };
            let Some((link, ips)) = links.get_mut(pos) else {
                continue;
            };
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_PACKET => {
                    let ll = &*(ifa.ifa_addr as *const libc::sockaddr_ll);
                    link.index = ll.sll_ifindex;
                    if ll.sll_halen == 6 {
                        link.mac.copy_from_slice(&ll.sll_addr[..6]);
                    }
                }
                libc::AF_INET if !ifa.ifa_netmask.is_null() => {
                    let addr = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    let mask = &*(ifa.ifa_netmask as *const libc::sockaddr_in);
                    let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
                    let prefix = u32::from_be(mask.sin_addr.s_addr).count_ones();
                    link.networks
                        .push(Ipv4Cidr::new(ip, u8::try_from(prefix).unwrap_or(32)));
                    ips.push(ip);
                }
                _ => {}
            }
        }
        libc::freeifaddrs(head);
    }
    let found = links.into_iter().find(|(l, ips)| match name {
        Some(n) => l.name == n,
        None => ips.iter().any(|ip| node_ips.contains(ip)),
    });
    match found {
        Some((link, _)) if link.index > 0 && link.mac != [0; 6] => Ok(link),
        Some((link, _)) => Err(io::Error::other(format!(
            "interface {} has no Ethernet address to answer ARP with",
            link.name
        ))),
        None => Err(io::Error::other(match name {
            Some(n) => format!("no interface named {n}"),
            None => format!(
                "no interface holds the node's addresses {node_ips:?}; pass --announce-interface"
            ),
        })),
    }
}

/// An AF_PACKET socket on one interface, answering ARP for the addresses in its set.
pub struct Responder {
    fd: Arc<OwnedFd>,
    link: Link,
    announced: Arc<Mutex<BTreeSet<Ipv4Addr>>>,
    stop: Arc<AtomicBool>,
}

impl Responder {
    /// Opens the socket and starts answering (on a thread of its own: a blocking receive with a
    /// one-second timeout, so a stop is seen within a second).
    pub fn start(link: Link) -> io::Result<Responder> {
        let fd = Arc::new(open(link.index)?);
        let announced: Arc<Mutex<BTreeSet<Ipv4Addr>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (rfd, set, halt, mac, index) = (
            fd.clone(),
            announced.clone(),
            stop.clone(),
            link.mac,
            link.index,
        );
        std::thread::Builder::new()
            .name("arp-responder".into())
            .spawn(move || answer(&rfd, &set, &halt, mac, index))?;
        Ok(Responder {
            fd,
            link,
            announced,
            stop,
        })
    }

    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Answers for `ip` from now on, and tells the segment so.
    pub fn announce(&self, ip: Ipv4Addr) {
        lock(&self.announced).insert(ip);
        self.gratuitous(ip);
    }

    /// Stops answering for `ip`.
    pub fn withdraw(&self, ip: Ipv4Addr) {
        lock(&self.announced).remove(&ip);
    }

    /// Sends gratuitous ARP for `ip` (a failure is logged: the next request is still answered).
    pub fn gratuitous(&self, ip: Ipv4Addr) {
        for f in gratuitous(ip, self.link.mac) {
            if let Err(e) = send(&self.fd, self.link.index, BROADCAST, &f) {
                tracing::warn!(%ip, interface = %self.link.name, error = %e, "gratuitous ARP not sent");
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn lock(set: &Mutex<BTreeSet<Ipv4Addr>>) -> std::sync::MutexGuard<'_, BTreeSet<Ipv4Addr>> {
    set.lock().unwrap_or_else(|e| e.into_inner())
}

fn answer(fd: &OwnedFd, set: &Mutex<BTreeSet<Ipv4Addr>>, stop: &AtomicBool, mac: Mac, index: i32) {
    let mut buf = [0u8; 1514];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: recv writes at most buf.len() bytes into buf.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let Ok(n) = usize::try_from(n) else {
            let e = io::Error::last_os_error();
            if !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) {
                tracing::warn!(error = %e, "ARP receive failed");
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            continue;
        };
        let Some(req) = buf.get(..n).and_then(parse_request) else {
            continue;
        };
        if !lock(set).contains(&req.target) {
            continue;
        }
        if let Err(e) = send(fd, index, req.sender_mac, &reply(&req, mac)) {
            tracing::warn!(target = %req.target, error = %e, "ARP reply not sent");
        }
    }
}

fn open(index: i32) -> io::Result<OwnedFd> {
    let proto = i32::from(ETH_P_ARP.to_be());
    // SAFETY: plain socket calls on a descriptor owned from the moment it exists.
    unsafe {
        let raw = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ARP.to_be();
        sll.sll_ifindex = index;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        if libc::bind(raw, (&sll as *const libc::sockaddr_ll).cast(), len) != 0 {
            return Err(io::Error::last_os_error());
        }
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        let tlen = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        let opt = (&timeout as *const libc::timeval).cast();
        if libc::setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVTIMEO, opt, tlen) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn send(fd: &OwnedFd, index: i32, dst: Mac, frame: &[u8]) -> io::Result<()> {
    // SAFETY: sendto reads frame.len() bytes of frame and the address it is given.
    unsafe {
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ARP.to_be();
        sll.sll_ifindex = index;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&dst);
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        let sent = libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&sll as *const libc::sockaddr_ll).cast(),
            len,
        );
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: Mac = [0x02, 0, 0, 0, 0, 0x11];
    const ASKER: Mac = [0x02, 0, 0, 0, 0, 0xfe];

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_request_is_answered_to_the_asker_with_our_address() {
        // The request a host sends for 172.30.0.200 (as in a capture: who-has .200 tell .254).
        let req = frame(
            BROADCAST,
            REQUEST,
            ASKER,
            ip("172.30.0.254"),
            [0; 6],
            ip("172.30.0.200"),
        );
        let parsed = parse_request(&req).unwrap();
        assert_eq!(
            parsed,
            Request {
                sender_mac: ASKER,
                sender_ip: ip("172.30.0.254"),
                target: ip("172.30.0.200"),
            }
        );
        let r = reply(&parsed, MAC);
        assert_eq!(&r[0..6], &ASKER, "to the asker");
        assert_eq!(&r[6..12], &MAC);
        assert_eq!(&r[20..22], &[0, 2], "a reply");
        assert_eq!(&r[22..28], &MAC, "200 is at our address");
        assert_eq!(&r[28..32], &[172, 30, 0, 200]);
        assert_eq!(&r[32..38], &ASKER);
        assert_eq!(&r[38..42], &[172, 30, 0, 254]);
        assert_eq!(parse_request(&r), None, "a reply is not a request");
    }

    #[test]
    fn what_is_not_an_ipv4_arp_request_is_left_alone() {
        let req = frame(
            BROADCAST,
            REQUEST,
            ASKER,
            ip("10.0.0.1"),
            [0; 6],
            ip("10.0.0.2"),
        );
        assert_eq!(parse_request(&req[..41]), None, "short");
        let mut ipv6 = req;
        ipv6[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(parse_request(&ipv6), None);
        let mut not_arp = req;
        not_arp[12..14].copy_from_slice(&ETH_P_IP.to_be_bytes());
        assert_eq!(parse_request(&not_arp), None);
    }

    #[test]
    fn gratuitous_arp_names_the_address_as_sender_and_target() {
        for g in gratuitous(ip("172.30.0.200"), MAC) {
            assert_eq!(&g[0..6], &BROADCAST);
            assert_eq!(&g[22..28], &MAC);
            assert_eq!(&g[28..32], &[172, 30, 0, 200]);
            assert_eq!(&g[38..42], &[172, 30, 0, 200]);
        }
    }
}
