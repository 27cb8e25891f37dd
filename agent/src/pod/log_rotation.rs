//! Container log rotation, as the kubelet does it (containerLogMaxSize, containerLogMaxFiles):
//! a log over the size is renamed `<n>.log.<YYYYmmdd-HHMMSS>`, the runtime reopens it, and the
//! oldest rotated files beyond the limit are removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use keelson_proto::runtime::v1 as cri;

use crate::cri::{labels, Cri};

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_size: u64,
    /// Files per container log, the current one included.
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_size: 10 << 20,
            max_files: 5,
        }
    }
}

/// The name a log gets when rotated at `now`.
pub fn rotated_name(log: &Path, now: Timestamp) -> PathBuf {
    let stamp = now.strftime("%Y%m%d-%H%M%S").to_string();
    PathBuf::from(format!("{}.{stamp}", log.display()))
}

/// Rotated files of `log` in its directory, oldest first.
pub fn rotated_files(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with(&prefix) && !n.ends_with(".tmp"))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Which rotated files (oldest first) go, so that at most `max_files - 1` remain. Pure.
pub fn excess(rotated: &[PathBuf], max_files: usize) -> Vec<PathBuf> {
    let keep = max_files.saturating_sub(1);
    rotated
        .iter()
        .take(rotated.len().saturating_sub(keep))
        .cloned()
        .collect()
}

/// Rotates one container's log if it is over the limit; returns whether it did.
pub async fn rotate_if_needed(cri: &dyn Cri, id: &str, log: &Path, limits: Limits) -> bool {
    let size = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
    if size <= limits.max_size {
        return false;
    }
    let target = rotated_name(log, Timestamp::now());
    if std::fs::rename(log, &target).is_err() {
        return false;
    }
    if let Err(e) = cri.reopen_container_log(id).await {
        // The runtime keeps writing to the renamed file: put it back rather than lose lines.
        tracing::warn!(container = %id, error = %e, "reopening the log failed; rotation undone");
        let _ = std::fs::rename(&target, log);
        return false;
    }
    for old in excess(&rotated_files(log), limits.max_files) {
        let _ = std::fs::remove_file(old);
    }
    true
}

/// Checks every running container of this node every `period`.
pub async fn run(cri: Arc<dyn Cri>, node: String, limits: Limits, period: Duration) {
    let selector = HashMap::from([(labels::NODE.to_string(), node)]);
    loop {
        tokio::time::sleep(period).await;
        let Ok(containers) = cri.list_containers(selector.clone()).await else {
            continue;
        };
        for c in containers
            .iter()
            .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
        {
            let Ok(status) = cri.container_status(&c.id).await else {
                continue;
            };
            if !status.log_path.is_empty()
                && rotate_if_needed(cri.as_ref(), &c.id, Path::new(&status.log_path), limits).await
            {
                tracing::info!(container = %c.id, log = %status.log_path, "container log rotated");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri_fake::FakeCri;

    #[tokio::test]
    async fn rotates_over_the_limit_and_keeps_max_files() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("0.log");
        let cri = FakeCri::default();
        let limits = Limits {
            max_size: 10,
            max_files: 3,
        };
        std::fs::write(&log, "short\n").unwrap();
        assert!(!rotate_if_needed(&cri, "c1", &log, limits).await);
        for i in 0..4 {
            std::fs::write(&log, format!("a line longer than ten bytes {i}\n")).unwrap();
            // Distinct stamps: rotations one second apart.
            let target = rotated_name(&log, Timestamp::from_second(1_700_000_000 + i).unwrap());
            std::fs::write(&target, "old\n").unwrap();
        }
        assert!(rotate_if_needed(&cri, "c1", &log, limits).await);
        assert_eq!(cri.take_calls(), vec!["ReopenContainerLog c1"]);
        assert!(!log.exists(), "the runtime recreates it when reopening");
        assert_eq!(
            rotated_files(&log).len(),
            2,
            "max_files 3 = current + 2 rotated"
        );
    }

    #[test]
    fn excess_drops_the_oldest() {
        let files: Vec<PathBuf> = ["a.1", "a.2", "a.3"].iter().map(PathBuf::from).collect();
        assert_eq!(excess(&files, 3), vec![PathBuf::from("a.1")]);
        assert!(excess(&files, 5).is_empty());
    }
}
