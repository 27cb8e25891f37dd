//! Forwarding switches in the plugin's own (host) namespace.

use std::fs;
use std::io;

fn ensure_one(path: &str) -> io::Result<()> {
    // Reading first avoids a write (and its permission needs) on the common path.
    if fs::read_to_string(path)?.trim() == "1" {
        return Ok(());
    }
    fs::write(path, "1")
}

pub fn ensure_forwarding(v4: bool, v6: bool) -> io::Result<()> {
    if v4 {
        ensure_one("/proc/sys/net/ipv4/ip_forward")?;
    }
    if v6 {
        ensure_one("/proc/sys/net/ipv6/conf/all/forwarding")?;
    }
    Ok(())
}
