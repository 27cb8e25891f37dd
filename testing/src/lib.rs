//! The one way Keelson's tests reach the real parts: built binaries, a keelson-apiserver on a free
//! port, kubectl against it, test hosts (network namespaces with no default route), containerd
//! for a node, and child processes that die with the test.
//!
//! A dev-dependency only. Helpers panic with a message that says what is missing and how to get
//! it: a test that cannot run here fails loudly instead of passing.

pub mod apiserver;
pub mod bins;
pub mod containerd;
pub mod daemons;
pub mod etcd;
pub mod hosts;
pub mod interop;
pub mod kubectl;
pub mod process;
pub mod require;
pub mod tls;

pub use apiserver::{Apiserver, Component};
pub use bins::binary;
pub use containerd::Containerd;
pub use daemons::Daemon;
pub use etcd::Etcd;
pub use hosts::TestHost;
pub use interop::Kmock;
pub use kubectl::Kubectl;
pub use process::{eventually, free_port, run, ChildGuard};
pub use require::{require_root, require_root_and_tools, require_tools};

use std::path::{Path, PathBuf};

/// The repository's root (the workspace folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The repository's `scripts/` folder.
pub fn scripts_dir() -> PathBuf {
    repo_root().join("scripts")
}

/// The repository's `examples/` folder (the manifests users apply).
pub fn examples_dir() -> PathBuf {
    repo_root().join("examples")
}

/// Removes what crashed test runs left (their creating process is gone): containerds first,
/// then the hosts they ran in. Run once per process, at the first `TestHost::create`.
pub fn remove_leftovers() {
    containerd::remove_leftovers();
    hosts::remove_leftovers();
}

/// A short random suffix for unique names (hex).
pub fn random_suffix() -> String {
    format!("{:06x}", rand::random::<u32>() & 0xff_ffff)
}

/// The sum of the samples in Prometheus text whose line starts with `name_and_labels`
/// (0 when absent).
pub fn metric_sum(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name_and_labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The median of a benchmark's samples (the upper one of an even count); panics when empty.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
