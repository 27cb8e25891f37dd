//! Where allocations live. The allocator only sees this trait; `DiskStore` is the real one and
//! tests use an in-memory fake.

use std::io;
use std::net::IpAddr;

/// Who holds an address: an attachment, named by container ID and interface name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub id: String,
    pub ifname: String,
}

impl Owner {
    pub fn new(id: &str, ifname: &str) -> Self {
        Owner {
            id: id.to_string(),
            ifname: ifname.to_string(),
        }
    }

    /// host-local's file body: "<id>\r\n<ifname>".
    pub fn to_file(&self) -> String {
        format!("{}\r\n{}", self.id.trim(), self.ifname)
    }

    /// Also accepts host-local's older body with only the ID (ifname left empty).
    pub fn from_file(body: &str) -> Owner {
        let mut lines = body.lines();
        let id = lines.next().unwrap_or("").trim().to_string();
        let ifname = lines.next().unwrap_or("").trim().to_string();
        Owner { id, ifname }
    }

    /// An owner recorded without an ifname matches any ifname of that container.
    pub fn matches(&self, other: &Owner) -> bool {
        self.id == other.id && (self.ifname == other.ifname || self.ifname.is_empty())
    }
}

pub trait Store {
    /// Records `ip` for `owner` unless someone holds it; false when taken.
    fn reserve(&mut self, ip: IpAddr, owner: &Owner, set_index: usize) -> io::Result<bool>;
    fn last_reserved(&self, set_index: usize) -> io::Result<Option<IpAddr>>;
    fn owner_of(&self, ip: IpAddr) -> io::Result<Option<Owner>>;
    fn release(&mut self, ip: IpAddr) -> io::Result<()>;
    /// Every allocation, in no particular order.
    fn list(&self) -> io::Result<Vec<(IpAddr, Owner)>>;
}

/// In-memory store for unit tests.
#[derive(Debug, Default)]
pub struct MemStore {
    pub allocs: std::collections::BTreeMap<IpAddr, Owner>,
    pub last: std::collections::BTreeMap<usize, IpAddr>,
}

impl Store for MemStore {
    fn reserve(&mut self, ip: IpAddr, owner: &Owner, set_index: usize) -> io::Result<bool> {
        if self.allocs.contains_key(&ip) {
            return Ok(false);
        }
        self.allocs.insert(ip, owner.clone());
        self.last.insert(set_index, ip);
        Ok(true)
    }
    fn last_reserved(&self, set_index: usize) -> io::Result<Option<IpAddr>> {
        Ok(self.last.get(&set_index).copied())
    }
    fn owner_of(&self, ip: IpAddr) -> io::Result<Option<Owner>> {
        Ok(self.allocs.get(&ip).cloned())
    }
    fn release(&mut self, ip: IpAddr) -> io::Result<()> {
        self.allocs.remove(&ip);
        Ok(())
    }
    fn list(&self) -> io::Result<Vec<(IpAddr, Owner)>> {
        Ok(self.allocs.iter().map(|(ip, o)| (*ip, o.clone())).collect())
    }
}
