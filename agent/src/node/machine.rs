//! Facts about the machine the node reports: CPUs, memory, disk, addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// cpu, memory, ephemeral-storage and pods as the Node's capacity.
pub fn capacity(root: &Path, max_pods: u32) -> BTreeMap<String, Quantity> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| parse_mem_total_kib(&s))
        .unwrap_or(0);
    let disk = nix::sys::statvfs::statvfs(root)
        .map(|s| s.blocks() * s.fragment_size())
        .unwrap_or(0);
    BTreeMap::from([
        ("cpu".to_string(), Quantity(cpus.to_string())),
        ("memory".to_string(), Quantity(format!("{mem_kib}Ki"))),
        (
            "ephemeral-storage".to_string(),
            Quantity(format!("{}Ki", disk / 1024)),
        ),
        ("pods".to_string(), Quantity(max_pods.to_string())),
    ])
}

/// The machine's memory (MemTotal) in bytes; 0 when /proc/meminfo cannot be read.
pub fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| parse_mem_total_kib(&s))
        .map_or(0, |kib| kib * 1024)
}

pub fn parse_mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// The machine's architecture in Go's names (amd64, arm64), as nodes report it.
pub fn arch() -> String {
    std::env::consts::ARCH
        .replace("x86_64", "amd64")
        .replace("aarch64", "arm64")
}

/// The first global IPv4 address of this network namespace (the node's InternalIP by default).
pub fn first_ipv4() -> Option<IpAddr> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            let ip = sin.ip();
            if !ip.is_loopback() && !ip.is_link_local() {
                return Some(IpAddr::V4(ip));
            }
        }
    }
    None
}

pub fn kernel_version() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn os_image() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "Linux".into())
}

pub fn machine_id() -> String {
    std::fs::read_to_string("/etc/machine-id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_mem_total() {
        assert_eq!(
            super::parse_mem_total_kib("MemTotal:       24554312 kB\nMemFree: 1 kB\n"),
            Some(24_554_312)
        );
        assert_eq!(super::parse_mem_total_kib("nothing"), None);
    }
}
