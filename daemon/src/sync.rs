//! The loop most controllers here need: informers keep local stores of the objects, any change
//! wakes one sync, and bursts of changes are batched into one sync by a short debounce.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;
use kube::{Api, Resource};
use tokio::sync::Notify;

use crate::informer::Objects;
use crate::signals::Shutdown;

/// "Something changed": many watches notify, one loop waits. A change while the loop is busy is
/// kept (one permit), so none is missed and bursts wake it once.
#[derive(Clone, Default)]
pub struct Changes(Arc<Notify>);

impl Changes {
    pub fn notify(&self) {
        self.0.notify_one();
    }

    pub async fn changed(&self) {
        self.0.notified().await;
    }

    /// An informer hook (`crate::inform`) that notifies on every change.
    pub fn on_change<T>(
        &self,
    ) -> impl FnMut(crate::informer::Change<T>) -> futures::future::Ready<()> + Send + 'static {
        let changes = self.clone();
        move |_| {
            changes.notify();
            futures::future::ready(())
        }
    }

    /// Forgets a change already noticed (the sync about to run covers it).
    pub fn clear(&self) {
        use futures::FutureExt;
        let _ = self.0.notified().now_or_never();
    }
}

/// Starts an informer of whole `K` objects in the background (watch errors are logged and
/// retried with kube-runtime's back-off); each change notifies `changes`. Returns its store.
pub fn reflect<K>(api: Api<K>, config: watcher::Config, changes: &Changes) -> Objects<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    // A copy is kept, not the decoded object: decoding leaves spare capacity in every list and
    // string (about an eighth more memory for Pods), and these stores live long (as kube's
    // reflector, which stores a clone too).
    #[allow(clippy::redundant_clone)]
    let compact = |o: K| Some(Arc::new(o.clone()));
    crate::inform(
        api,
        config,
        crate::namespaced_name,
        compact,
        changes.on_change(),
    )
}

/// How often a debounced sync loop runs.
#[derive(Clone, Copy, Debug)]
pub struct SyncLoop {
    /// After a change, wait this long for more before syncing (batches bursts).
    pub debounce: Duration,
    /// Sync at least this often even without changes (repairs drift, retries failures).
    pub resync: Duration,
}

impl SyncLoop {
    /// Runs `sync` now, then after every change (debounced) or `resync`, until `shutdown`.
    pub async fn run<F, Fut>(&self, changes: &Changes, shutdown: &Shutdown, mut sync: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            if shutdown.is_requested() {
                return;
            }
            // Changes seen while waiting out the debounce are part of this sync.
            changes.clear();
            sync().await;
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(self.resync) => continue,
                _ = shutdown.requested() => return,
            }
            if self.debounce.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.debounce) => {}
                _ = shutdown.requested() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counted() -> (Arc<AtomicUsize>, impl FnMut() -> futures::future::Ready<()>) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        (n, move || {
            m.fetch_add(1, Ordering::SeqCst);
            futures::future::ready(())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_one_sync_and_shutdown_stops_the_loop() {
        let changes = Changes::default();
        let (stop, shutdown) = Shutdown::manual();
        let (syncs, sync) = counted();
        let lp = SyncLoop {
            debounce: Duration::from_millis(100),
            resync: Duration::from_secs(60),
        };
        let c = changes.clone();
        let task = tokio::spawn(async move { lp.run(&c, &shutdown, sync).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            1,
            "the first sync runs at once"
        );
        for _ in 0..50 {
            changes.notify();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            2,
            "50 changes in 50 ms: one more sync"
        );
        stop.send(true).unwrap();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn without_changes_it_resyncs_periodically() {
        let (_stop, shutdown) = Shutdown::manual();
        let (syncs, sync) = counted();
        let lp = SyncLoop {
            debounce: Duration::from_millis(100),
            resync: Duration::from_secs(30),
        };
        let task = tokio::spawn(async move { lp.run(&Changes::default(), &shutdown, sync).await });
        tokio::time::sleep(Duration::from_secs(95)).await;
        assert_eq!(syncs.load(Ordering::SeqCst), 4, "at 0, 30, 60 and 90 s");
        task.abort();
    }
}
