//! Network namespaces: open one by path, and open netlink sockets inside it. A socket stays in
//! the namespace it was created in, so the thread only visits the container's namespace for the
//! moment it takes to open the socket.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use nix::sched::{setns, CloneFlags};
use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC};

use keelson_netlink::Netlink;

// From linux/magic.h: the filesystem behind /proc/<pid>/ns/* and bind-mounted namespace files.
const NSFS_MAGIC: i64 = 0x6e73_6673;

pub struct NetNs {
    file: File,
}

impl NetNs {
    /// Opens a namespace file such as /var/run/netns/NAME or /proc/PID/ns/net.
    pub fn open(path: &str) -> io::Result<NetNs> {
        let file = File::open(path)?;
        let fs = fstatfs(file.as_fd()).map_err(io::Error::from)?;
        let magic = fs.filesystem_type().0;
        if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC.0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path} is not a network namespace file"),
            ));
        }
        Ok(NetNs { file })
    }

    /// The namespace this thread is in now.
    pub fn current() -> io::Result<NetNs> {
        Ok(NetNs {
            file: File::open("/proc/thread-self/ns/net")?,
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Runs `f` inside this namespace and returns to `home` afterwards.
    pub fn run_in<T>(&self, home: &NetNs, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        setns(self.file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        let out = f();
        setns(home.file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        out
    }

    /// A netlink socket that talks to this namespace.
    pub fn netlink(&self, home: &NetNs) -> io::Result<Netlink> {
        self.run_in(home, Netlink::open)
    }
}
