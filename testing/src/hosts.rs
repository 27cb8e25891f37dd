//! Test hosts: network namespaces a test creates and removes, loopback up and NO default route,
//! so nothing sent inside one can leave the machine. Names are `kt-<prefix>-<pid>-<rand>`; the
//! first host a process creates removes what dead processes left under `kt-` (namespaces, their
//! registries, containerds and cgroups), so a crashed run never blocks the next.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

use nix::sched::{setns, CloneFlags};

use crate::process::run_ok;
use crate::{random_suffix, scripts_dir};

pub const NETNS_DIR: &str = "/var/run/netns";
const PREFIX: &str = "kt-";

/// A network namespace created for one test, removed (with its cgroups) on drop.
pub struct TestHost {
    pub name: String,
}

impl TestHost {
    /// A new host named `kt-<prefix>-<pid>-<rand>`. Needs root.
    pub fn create(prefix: &str) -> TestHost {
        crate::require_root_and_tools(&["ip", "nsenter"]);
        static LEFTOVERS: Once = Once::new();
        LEFTOVERS.call_once(crate::remove_leftovers);
        let name = format!(
            "{PREFIX}{prefix}-{}-{}",
            std::process::id(),
            random_suffix()
        );
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let host = TestHost { name };
        host.ip(&["link", "set", "lo", "up"]);
        host
    }

    pub fn path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.name)
    }

    /// A command run inside this host (`nsenter --net`: unlike `ip netns exec` it keeps the
    /// machine's /sys, where runc finds the cgroup mounts).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        command_in(Some(&self.path()), program)
    }

    /// `ip -n <host> args...`; panics with ip's message on failure. Returns stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        run_ok(Command::new("ip").arg("-n").arg(&self.name).args(args))
    }

    /// A shell command inside the host, to the end (status not checked).
    pub fn sh(&self, script: &str) -> Output {
        self.command("sh")
            .args(["-c", script])
            .output()
            .expect("run nsenter sh")
    }

    /// A shell command inside the host that must succeed; returns stdout.
    pub fn sh_ok(&self, script: &str) -> String {
        run_ok(self.command("sh").args(["-c", script]))
    }

    /// `sysctl -w key=value` inside the host.
    pub fn sysctl(&self, setting: &str) {
        run_ok(self.command("sysctl").args(["-qw", setting]));
    }

    /// Runs `f` on a thread that entered this host; sockets it opens live there.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = self.path();
        std::thread::spawn(move || {
            let file = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
            setns(file.as_fd(), CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("setns {}: {e}", path.display()));
            f()
        })
        .join()
        .expect("thread in test host panicked")
    }

    /// Names of the links in this host.
    pub fn links(&self) -> Vec<String> {
        self.ip(&["-o", "link", "show"])
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .collect()
    }

    /// A veth pair between this host (`ifname`, `addr` in CIDR form) and `peer`, both ends up.
    pub fn veth(
        &self,
        ifname: &str,
        addr: &str,
        peer: &TestHost,
        peer_ifname: &str,
        peer_addr: &str,
    ) {
        self.ip(&[
            "link",
            "add",
            ifname,
            "type",
            "veth",
            "peer",
            "name",
            peer_ifname,
            "netns",
            &peer.name,
        ]);
        for (host, dev, a) in [(self, ifname, addr), (peer, peer_ifname, peer_addr)] {
            host.ip(&["addr", "add", a, "dev", dev]);
            host.ip(&["link", "set", dev, "up"]);
        }
    }
}

/// `program` run in the network namespace at `netns` (through nsenter), or here without one.
pub fn command_in(netns: Option<&Path>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match netns {
        Some(ns) => {
            let mut cmd = Command::new("nsenter");
            cmd.arg(format!("--net={}", ns.display())).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        remove_host(&self.name);
    }
}

/// Removes one host with what tests start in it: its registry, its namespace, its pods' cgroups
/// (tests give pods the cgroup parent `/<host name>`).
fn remove_host(name: &str) {
    let _ = Command::new(scripts_dir().join("registry"))
        .args(["--netns", name, "stop"])
        .output();
    let _ = Command::new("ip").args(["netns", "del", name]).output();
    remove_cgroups(name);
}

/// The pid in a `kt-<prefix>-<pid>-<rand>` name.
fn owner_pid(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.rsplit('-');
    parts.next()?;
    parts.next()?.parse().ok()
}

pub(crate) fn owner_gone(name: &str) -> bool {
    owner_pid(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes hosts whose creating process is gone (after their containerds: `crate::remove_leftovers`).
pub(crate) fn remove_leftovers() {
    if let Ok(dir) = std::fs::read_dir(NETNS_DIR) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if owner_gone(&name) {
                remove_host(&name);
            }
        }
    }
}

/// Removes the (empty) cgroup tree `/<root>` in every cgroup hierarchy, deepest first.
pub fn remove_cgroups(root: &str) {
    use keelson_daemon::cgroupfs;
    for hierarchy in cgroupfs::hierarchies(Path::new(cgroupfs::MOUNT)) {
        let _ = cgroupfs::remove_tree(&hierarchy.join(root.trim_start_matches('/')));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_is_read_from_the_name() {
        assert_eq!(owner_pid("kt-agent-1234-abcdef"), Some(1234));
        assert_eq!(owner_pid("kt-two-part-99-0a0b0c"), Some(99));
        assert_eq!(owner_pid("kt-bench-abcdef"), None);
        assert_eq!(owner_pid("other-1-2"), None);
    }
}
