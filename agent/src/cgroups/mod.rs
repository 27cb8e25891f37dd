//! The QoS cgroup tree, as the kubelet's cgroup manager keeps it: the node-level cgroup
//! (`--cgroup-root`) holds the pods to allocatable when `--enforce-node-allocatable` has
//! `pods`; `burstable` and `besteffort` below it share CPU by QoS class; each pod gets a
//! `pod<uid>` cgroup with its requests and limits before its sandbox starts, removed when it
//! is torn down, and folders of pods that no longer exist are swept (`run`).

pub mod limits;
pub mod tree;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use limits::Limits;
use tree::{Tree, QOS_DIRS};

pub struct QosCgroups {
    tree: Tree,
    node: Limits,
}

impl QosCgroups {
    /// `base` is where the hierarchies are mounted (`keelson_daemon::cgroupfs::MOUNT`).
    pub fn new(base: &Path, root: &str, node: Limits) -> QosCgroups {
        QosCgroups {
            tree: Tree::new(base, root),
            node,
        }
    }

    /// The node-level cgroup and the QoS classes' cgroups, with their limits.
    pub fn ensure_node(&self) -> std::io::Result<()> {
        self.tree.apply(Path::new(""), &self.node)?;
        self.tree
            .apply(Path::new("besteffort"), &limits::best_effort())?;
        self.tree
            .apply(Path::new("burstable"), &limits::burstable(None::<&Pod>))
    }

    /// The pod's cgroup with its limits; `pods` are the node's pods (for the Burstable share).
    pub fn ensure_pod<'a>(
        &self,
        pod: &Pod,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> std::io::Result<()> {
        if crate::pod::qos::qos_class(pod) == "Burstable" {
            self.tree
                .apply(Path::new("burstable"), &limits::burstable(pods))?;
        }
        self.tree.apply(&pod_dir(pod), &limits::pod(pod))
    }

    /// Removes the pod's cgroup (from whichever QoS class it was in).
    pub fn remove_pod(&self, uid: &str) -> std::io::Result<()> {
        let mut result = Ok(());
        for qos in QOS_DIRS {
            let dir = Path::new(qos).join(format!("pod{uid}"));
            result = result.and(self.tree.remove(&dir));
        }
        result
    }

    /// Removes the cgroups of pods not in `keep` (gone while the agent was down, or whose
    /// removal failed while a process was still exiting), and resets the Burstable share.
    pub fn sweep(&self, keep: &BTreeSet<String>, pods: &[Arc<Pod>]) {
        for (uid, dirs) in self.tree.pod_dirs() {
            if keep.contains(&uid) {
                continue;
            }
            for dir in dirs {
                match self.tree.remove(&dir) {
                    Ok(()) => {
                        tracing::info!(pod = %uid, "removed the cgroup of a pod that is gone")
                    }
                    Err(e) => tracing::debug!(pod = %uid, error = %e, "pod cgroup still in use"),
                }
            }
        }
        let burstable = limits::burstable(pods.iter().map(|p| p.as_ref()));
        if let Err(e) = self.tree.apply(Path::new("burstable"), &burstable) {
            tracing::warn!(error = %e, "burstable cgroup not updated");
        }
    }

    /// Where `controller`'s files of the pod's cgroup are.
    #[cfg(test)]
    pub fn pod_path(&self, controller: &str, pod: &Pod) -> PathBuf {
        self.tree.dir(controller, &pod_dir(pod))
    }
}

/// The pod's cgroup below the root, by QoS class.
fn pod_dir(pod: &Pod) -> PathBuf {
    PathBuf::from(crate::pod::qos::cgroup_parent("", pod).trim_start_matches('/'))
}

/// Every `every`, sweeps the cgroups of pods `snapshot` no longer has: it returns the UIDs to
/// keep (the API's, the static and the runtime's pods) and the node's pods, or None when it
/// cannot tell (the runtime did not answer), and then nothing is removed.
pub async fn run<F, Fut>(cgroups: Arc<QosCgroups>, every: Duration, snapshot: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<(BTreeSet<String>, Vec<Arc<Pod>>)>>,
{
    loop {
        if let Some((keep, pods)) = snapshot().await {
            let cgroups = cgroups.clone();
            let swept = tokio::task::spawn_blocking(move || cgroups.sweep(&keep, &pods));
            let _ = swept.await;
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests;
