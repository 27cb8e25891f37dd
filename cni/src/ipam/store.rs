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
    /// Addresses recorded in the owner's index (a superset of what it holds: an entry is
    /// written before the allocation, so a crash in between leaves only a harmless extra).
    /// None when the owner has no index, e.g. for allocations written by host-local.
    fn indexed(&self, owner: &Owner) -> io::Result<Option<Vec<IpAddr>>>;
    fn drop_index(&mut self, owner: &Owner) -> io::Result<()>;
    /// Removes the indexes of every owner not in `keep` (GC).
    fn drop_indexes_except(&mut self, keep: &std::collections::HashSet<Owner>) -> io::Result<()>;
}

/// In-memory store for unit tests.
#[derive(Debug, Default)]
pub struct MemStore {
    pub allocs: std::collections::BTreeMap<IpAddr, Owner>,
    pub last: std::collections::BTreeMap<usize, IpAddr>,
    pub index: std::collections::HashMap<Owner, Vec<IpAddr>>,
}

impl Store for MemStore {
    fn reserve(&mut self, ip: IpAddr, owner: &Owner, set_index: usize) -> io::Result<bool> {
        if self.allocs.contains_key(&ip) {
            return Ok(false);
        }
        self.index.entry(owner.clone()).or_default().push(ip);
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
    fn indexed(&self, owner: &Owner) -> io::Result<Option<Vec<IpAddr>>> {
        Ok(self.index.get(owner).cloned())
    }
    fn drop_index(&mut self, owner: &Owner) -> io::Result<()> {
        self.index.remove(owner);
        Ok(())
    }
    fn drop_indexes_except(&mut self, keep: &std::collections::HashSet<Owner>) -> io::Result<()> {
        self.index.retain(|o, _| keep.contains(o));
        Ok(())
    }
}
