//! Deleting a veth pair costs the kernel ~15 ms (RCU grace periods while it unregisters both
//! ends), most of a synchronous DEL. By default DEL takes the host end down (so it carries no
//! traffic and the address may be reused) and leaves the unregister to a detached child
//! process that outlives the plugin. `"syncDelete": true` in the configuration waits instead.

use std::os::fd::AsRawFd;

use nix::unistd::{fork, setsid, ForkResult};

use crate::netlink::{link, Netlink};

/// Deletes link `index` (in the current namespace) from a detached child; returns at once.
pub fn delete_later(index: u32) -> std::io::Result<()> {
    // SAFETY: the plugin is single-threaded, so the child may run arbitrary code after fork;
    // it leaves only through _exit, never returning into the parent's stack.
    match unsafe { fork() }.map_err(std::io::Error::from)? {
        ForkResult::Parent { .. } => Ok(()),
        ForkResult::Child => {
            detach();
            let ok = Netlink::open()
                .and_then(|mut nl| link::delete_index(&mut nl, index))
                .is_ok();
            // SAFETY: _exit ends the child without running the parent's destructors twice.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
    }
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
