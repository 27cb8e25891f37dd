//! Checks that a test can run on this machine; each failure names what is missing.

/// Fails the test unless it runs as root (needed for namespaces, containerd, firewall rules).
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (it creates network namespaces or runs containerd): run it as scripts/test does"
    );
}

/// Fails the test unless every tool is on PATH (or in /usr/sbin, /sbin).
pub fn require_tools(tools: &[&str]) {
    for tool in tools {
        assert!(
            which(tool).is_some(),
            "this test needs `{tool}`: run scripts/install-deps (packages in scripts/deps.d/)"
        );
    }
}

pub fn require_root_and_tools(tools: &[&str]) {
    require_root();
    require_tools(tools);
}

/// The full path of a program on PATH (with the sbin folders root has), if any.
pub fn which(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}
