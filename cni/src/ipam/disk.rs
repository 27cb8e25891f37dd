//! host-local-compatible allocation files: `<dir>/<ip>` holding "<id>\r\n<ifname>",
//! `<dir>/last_reserved_ip.<set>` and `<dir>/lock`. Every access holds an exclusive flock on
//! the lock file, which the kernel drops if the process is killed.
//!
//! Allocation files are written to a temporary name and linked into place, so a crash never
//! leaves a half-written allocation; leftover temporaries are removed by the next lock holder.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::store::{Owner, Store};

const TMP_PREFIX: &str = ".tmp-";
const LAST_RESERVED: &str = "last_reserved_ip.";
/// Per-owner index: the addresses an owner was given, one a line. host-local ignores these
/// (their content never matches an owner record).
const INDEX_PREFIX: &str = ".owner-";

pub struct DiskStore {
    dir: PathBuf,
    // Held for the lifetime of the store; closing it releases the flock.
    _lock: File,
}

impl DiskStore {
    /// Creates the directory if needed and waits for the lock.
    pub fn open(dir: &Path) -> io::Result<DiskStore> {
        fs::create_dir_all(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is touched.
            let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(DiskStore {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    fn path_of(&self, ip: IpAddr) -> PathBuf {
        self.dir.join(ip.to_string())
    }

    fn index_path(&self, owner: &Owner) -> PathBuf {
        self.dir.join(format!(
            "{INDEX_PREFIX}{:016x}",
            crate::names::fnv1a(&[&owner.id, &owner.ifname])
        ))
    }

    fn write_atomic(&self, tmp_name: &str, body: &str) -> io::Result<PathBuf> {
        let tmp = self.dir.join(tmp_name);
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&tmp)?;
        f.write_all(body.as_bytes())?;
        Ok(tmp)
    }
}

impl Store for DiskStore {
    fn reserve(&mut self, ip: IpAddr, owner: &Owner, set_index: usize) -> io::Result<bool> {
        let target = self.path_of(ip);
        if target.exists() {
            return Ok(false);
        }
        // Index first: a crash after it leaves an entry that release() verifies and skips.
        let mut index = self.indexed(owner)?.unwrap_or_default();
        if !index.contains(&ip) {
            index.push(ip);
            let body: String = index.iter().map(|i| format!("{i}\n")).collect();
            let tmp =
                self.write_atomic(&format!("{TMP_PREFIX}index-{}", std::process::id()), &body)?;
            fs::rename(tmp, self.index_path(owner))?;
        }
        let tmp = self.write_atomic(
            &format!("{TMP_PREFIX}{ip}-{}", std::process::id()),
            &owner.to_file(),
        )?;
        let linked = fs::hard_link(&tmp, &target);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        // Only a round-robin hint, so written in place (a torn write just restarts the scan),
        // and without O_TRUNC: ext4 flushes a file truncated to zero on close, ~0.5 ms.
        let text = ip.to_string();
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(format!("{LAST_RESERVED}{set_index}")))?;
        f.write_all(text.as_bytes())?;
        f.set_len(text.len() as u64)?;
        Ok(true)
    }

    fn last_reserved(&self, set_index: usize) -> io::Result<Option<IpAddr>> {
        match fs::read_to_string(self.dir.join(format!("{LAST_RESERVED}{set_index}"))) {
            Ok(s) => Ok(s.trim().parse().ok()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn owner_of(&self, ip: IpAddr) -> io::Result<Option<Owner>> {
        match fs::read_to_string(self.path_of(ip)) {
            Ok(s) => Ok(Some(Owner::from_file(&s))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn release(&mut self, ip: IpAddr) -> io::Result<()> {
        match fs::remove_file(self.path_of(ip)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn indexed(&self, owner: &Owner) -> io::Result<Option<Vec<IpAddr>>> {
        match fs::read_to_string(self.index_path(owner)) {
            Ok(s) => Ok(Some(
                s.lines().filter_map(|l| l.trim().parse().ok()).collect(),
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn drop_index(&mut self, owner: &Owner) -> io::Result<()> {
        match fs::remove_file(self.index_path(owner)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn drop_indexes_except(&mut self, keep: &std::collections::HashSet<Owner>) -> io::Result<()> {
        let keep: std::collections::HashSet<PathBuf> =
            keep.iter().map(|o| self.index_path(o)).collect();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let is_index = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(INDEX_PREFIX));
            if is_index && !keep.contains(&entry.path()) {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<(IpAddr, Owner)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(TMP_PREFIX) {
                // We hold the lock, so no writer is mid-way: this is a crashed writer's leftover.
                let _ = fs::remove_file(entry.path());
                continue;
            }
            let Ok(ip) = name.parse::<IpAddr>() else {
                continue;
            };
            match fs::read_to_string(entry.path()) {
                Ok(body) => out.push((ip, Owner::from_file(&body))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_match_host_local_layout_and_tmp_leftovers_are_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("net");
        let mut store = DiskStore::open(&net).unwrap();
        let ip: IpAddr = "10.1.0.2".parse().unwrap();
        assert!(store.reserve(ip, &Owner::new("abc", "eth0"), 0).unwrap());
        assert!(!store.reserve(ip, &Owner::new("other", "eth0"), 0).unwrap());
        assert_eq!(
            fs::read_to_string(net.join("10.1.0.2")).unwrap(),
            "abc\r\neth0"
        );
        assert_eq!(
            fs::read_to_string(net.join("last_reserved_ip.0")).unwrap(),
            "10.1.0.2"
        );
        assert_eq!(
            store.indexed(&Owner::new("abc", "eth0")).unwrap(),
            Some(vec![ip])
        );
        // Allocation and index files are not listed as allocations.
        assert_eq!(store.list().unwrap().len(), 1);
        store.drop_index(&Owner::new("abc", "eth0")).unwrap();
        assert_eq!(store.indexed(&Owner::new("abc", "eth0")).unwrap(), None);
        fs::write(net.join(".tmp-10.1.0.3-1"), "half").unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(!net.join(".tmp-10.1.0.3-1").exists());
        store.release(ip).unwrap();
        store.release(ip).unwrap();
        assert!(store.list().unwrap().is_empty());
    }
}
