//! Deleting a veth pair costs the kernel ~15 ms of RCU waits while it unregisters both ends,
//! holding the rtnl lock; it is most of a synchronous DEL. By default DEL instead takes the host
//! end down and moves it to the `RETIRED_GROUP` link group (it carries no traffic from then on,
//! so its address may be reused), and a detached child deletes the whole group a moment later:
//! one kernel batch for all pairs retired meanwhile, off the runtime's critical path.
//! `"syncDelete": true` in the configuration deletes in DEL instead.

use std::os::fd::AsRawFd;
use std::time::Duration;

use nix::unistd::{fork, setsid, ForkResult};

use keelson_netlink::{link, Netlink};

/// Link group of retired host ends ("KC" in ASCII).
pub const RETIRED_GROUP: u32 = 0x4b43;

/// How long the reaper waits for more retirements before deleting the batch.
const BATCH_WINDOW: Duration = Duration::from_millis(30);

/// Deletes the retired group (in the current namespace) from a detached child; returns at once.
pub fn reap_later() -> std::io::Result<()> {
    // SAFETY: the plugin is single-threaded, so the child may run arbitrary code after fork;
    // it leaves only through _exit, never returning into the parent's stack.
    match unsafe { fork() }.map_err(std::io::Error::from)? {
        ForkResult::Parent { .. } => Ok(()),
        ForkResult::Child => {
            detach();
            std::thread::sleep(BATCH_WINDOW);
            let ok = reap_now().is_ok();
            // SAFETY: _exit ends the child without running the parent's destructors twice.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
    }
}

/// Deletes every retired link now.
pub fn reap_now() -> std::io::Result<()> {
    let mut nl = Netlink::open()?;
    link::delete_group(&mut nl, RETIRED_GROUP)
}

/// Lets go of the runtime's pipes, which would otherwise keep it waiting for our output.
fn detach() {
    let _ = setsid();
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process only.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
