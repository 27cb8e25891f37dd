//! The one informer of every component that watches: a kube-runtime watcher with its back-off,
//! folded into a typed store, a synced signal after the first list, and a hook awaited after
//! every change that reached the store. A record is whatever the component keeps of an object
//! (a small record, under a key of its own), or the whole object (`Objects`, by `reflect`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::DefaultBackoff;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::watch;

/// What reached the store, handed to the hook once the store holds it.
#[derive(Debug, PartialEq)]
pub enum Change<T> {
    /// `key` was added or changed; `old` is the record it replaced.
    Applied { key: String, old: Option<T> },
    /// `key` was deleted (or its object no longer makes a record).
    Deleted { key: String, old: T },
    /// A (re)list completed and replaced the store whole, so that deletions missed while the
    /// watch was down are gone too; `previous` is what the store held before.
    Relisted { previous: BTreeMap<String, T> },
}

/// The store an informer fills, and whether its first list completed. Made empty (`new`, e.g.
/// for a context its users share) and filled by `start`, or both at once by `inform`.
pub struct Informer<T> {
    records: Arc<RwLock<BTreeMap<String, T>>>,
    synced: Arc<watch::Sender<bool>>,
}

impl<T> Clone for Informer<T> {
    fn clone(&self) -> Self {
        Informer {
            records: self.records.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<T> Default for Informer<T> {
    fn default() -> Self {
        Informer {
            records: Arc::default(),
            synced: Arc::new(watch::channel(false).0),
        }
    }
}

impl<T: Clone> Informer<T> {
    /// The records as they are now.
    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, T>> {
        self.records.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &str) -> Option<T> {
        self.read().get(key).cloned()
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list has completed.
    pub async fn synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Whole objects by `namespace/name`: the store most controllers decide from.
pub type Objects<K> = Informer<Arc<K>>;

impl<K: Resource> Informer<Arc<K>> {
    /// Every object, in key order.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    /// The object `namespace/name` (no namespace for a cluster-scoped kind).
    pub fn object(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.get(&format!("{}/{name}", namespace.unwrap_or_default()))
    }

    /// A store already filled with `objects` and synced, for fixed inputs and tests.
    pub fn of(objects: impl IntoIterator<Item = K>) -> Self {
        let informer = Informer::default();
        *informer.records.write().unwrap_or_else(|p| p.into_inner()) = objects
            .into_iter()
            .filter_map(|o| Some((namespaced_name(&o)?, Arc::new(o))))
            .collect();
        informer.synced.send_replace(true);
        informer
    }
}

/// The key most records are kept under: `namespace/name` (`/name` for cluster objects).
pub fn namespaced_name<K: Resource>(obj: &K) -> Option<String> {
    Some(format!(
        "{}/{}",
        obj.namespace().unwrap_or_default(),
        obj.meta().name.as_deref()?
    ))
}

/// Starts watching `api` in the background: each object becomes `record(obj)` under `key(&obj)`
/// (None from `record` removes it), and `hook` is awaited with every change, in order.
pub fn inform<K, T, H, Fut>(
    api: Api<K>,
    config: watcher::Config,
    key: fn(&K) -> Option<String>,
    record: impl Fn(K) -> Option<T> + Send + 'static,
    hook: H,
) -> Informer<T>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + serde::de::DeserializeOwned + 'static,
    K::DynamicType: Default,
    T: Send + Sync + 'static,
    H: FnMut(Change<T>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let informer = Informer::default();
    informer.start(api, config, key, record, hook);
    informer
}

impl<T: Send + Sync + 'static> Informer<T> {
    /// Fills this store from a watch on `api`, as `inform` does.
    pub fn start<K, H, Fut>(
        &self,
        api: Api<K>,
        config: watcher::Config,
        key: fn(&K) -> Option<String>,
        record: impl Fn(K) -> Option<T> + Send + 'static,
        mut hook: H,
    ) where
        K: Resource + Clone + std::fmt::Debug + Send + Sync + serde::de::DeserializeOwned + 'static,
        K::DynamicType: Default,
        H: FnMut(Change<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let (store, synced) = (self.records.clone(), self.synced.clone());
        let kind = K::kind(&K::DynamicType::default()).to_string();
        tokio::spawn(async move {
            let without_versions = Arc::new(AtomicBool::new(false));
            let flag = without_versions.clone();
            let stream = watcher(api, config)
                .inspect(move |e| {
                    if matches!(e, Err(watcher::Error::NoResourceVersion)) {
                        flag.store(true, Ordering::Relaxed);
                    }
                })
                .backoff(RelistBackoff {
                    without_versions,
                    inner: DefaultBackoff::default(),
                });
            futures::pin_mut!(stream);
            let mut fold = Fold::default();
            let mut said_relisting = false;
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        say_why(&kind, &e, &mut said_relisting);
                        continue;
                    }
                };
                let event = keyed(event, key, &record);
                let change = {
                    let mut records = store.write().unwrap_or_else(|p| p.into_inner());
                    fold.apply(&mut records, event)
                };
                if let Some(change) = change {
                    hook(change).await;
                }
                // Synced once the hook has seen the first list too.
                if fold.synced && !*synced.borrow() {
                    synced.send_replace(true);
                }
            }
        });
    }
}

/// How often a store is relisted when the server cannot resume a watch (no resourceVersions).
const RELIST_PERIOD: Duration = Duration::from_secs(1);

/// client-go's back-off (kube-runtime's default), except after a watch event without a
/// resourceVersion: a server that never sends them (an emulator, a proxy that strips them)
/// cannot resume a watch, and kube-runtime's watcher then relists; waiting a fixed short period
/// there, not up to 30 s, keeps the store that late at most.
struct RelistBackoff {
    without_versions: Arc<AtomicBool>,
    inner: DefaultBackoff,
}

impl Iterator for RelistBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.without_versions.swap(false, Ordering::Relaxed) {
            return Some(RELIST_PERIOD);
        }
        self.inner.next()
    }
}

impl Backoff for RelistBackoff {
    fn reset(&mut self) {
        self.inner.reset();
    }
}

/// Logs a failed list or watch: once that the server cannot resume watches (no
/// resourceVersions), every time a refusal or another failure.
fn say_why(kind: &str, e: &watcher::Error, said_relisting: &mut bool) {
    match (e, refusal(e)) {
        (watcher::Error::NoResourceVersion, _) => {
            if !std::mem::replace(said_relisting, true) {
                tracing::warn!(
                    %kind,
                    "the API server sends objects without metadata.resourceVersion, so a watch \
                     cannot resume: relisting every {}s instead",
                    RELIST_PERIOD.as_secs()
                );
            }
        }
        (_, Some(code)) => tracing::warn!(
            %kind,
            code,
            error = %e,
            "the API server does not let this identity list and watch {kind} (refused, or not \
             served): this component needs both (its README names the role); retrying"
        ),
        (_, None) => tracing::warn!(%kind, error = %e, "watch failed; retrying"),
    }
}

/// The status code when the server refused the list or watch itself (401, 403, or 404: the
/// resource is not served), as opposed to a connection or transient failure.
fn refusal(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if matches!(s.code, 401 | 403 | 404) =>
        {
            Some(s.code)
        }
        _ => None,
    }
}

/// One watch event with the object replaced by its key and record.
type Keyed<T> = watcher::Event<(Option<String>, Option<T>)>;

fn keyed<K, T>(
    event: watcher::Event<K>,
    key: fn(&K) -> Option<String>,
    record: &impl Fn(K) -> Option<T>,
) -> Keyed<T> {
    let convert = |o: K| (key(&o), record(o));
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(convert(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(o) => watcher::Event::Apply(convert(o)),
        // A deleted object's key is all that matters.
        watcher::Event::Delete(o) => watcher::Event::Delete((key(&o), None)),
    }
}

/// The store's side of the watch events: a relist collected apart and swapped in whole.
struct Fold<T> {
    relist: Option<BTreeMap<String, T>>,
    synced: bool,
}

impl<T> Default for Fold<T> {
    fn default() -> Self {
        Fold {
            relist: None,
            synced: false,
        }
    }
}

impl<T> Fold<T> {
    fn apply(&mut self, records: &mut BTreeMap<String, T>, event: Keyed<T>) -> Option<Change<T>> {
        match event {
            watcher::Event::Init => {
                self.relist = Some(BTreeMap::new());
                None
            }
            watcher::Event::InitApply((Some(key), Some(r))) => {
                if let Some(buf) = self.relist.as_mut() {
                    buf.insert(key, r);
                }
                None
            }
            watcher::Event::InitApply(_) => None,
            watcher::Event::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                self.synced = true;
                let previous = std::mem::replace(records, fresh);
                Some(Change::Relisted { previous })
            }
            watcher::Event::Apply((Some(key), Some(r))) => {
                let old = records.insert(key.clone(), r);
                Some(Change::Applied { key, old })
            }
            watcher::Event::Apply((Some(key), None)) | watcher::Event::Delete((Some(key), _)) => {
                let old = records.remove(&key)?;
                Some(Change::Deleted { key, old })
            }
            watcher::Event::Apply((None, _)) | watcher::Event::Delete((None, _)) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event;

    fn ev(key: &str, v: Option<u32>) -> (Option<String>, Option<u32>) {
        (Some(key.to_string()), v)
    }

    #[test]
    fn a_relist_replaces_the_store_whole_and_says_what_it_held() {
        let (mut fold, mut store) = (Fold::default(), BTreeMap::new());
        assert_eq!(fold.apply(&mut store, Event::Init), None);
        assert_eq!(
            fold.apply(&mut store, Event::InitApply(ev("a", Some(1)))),
            None
        );
        assert!(
            store.is_empty(),
            "nothing is served before the list completes"
        );
        assert!(!fold.synced);
        let change = fold.apply(&mut store, Event::InitDone);
        assert_eq!(
            change,
            Some(Change::Relisted {
                previous: BTreeMap::new()
            })
        );
        assert!(fold.synced);
        assert_eq!(store, BTreeMap::from([("a".to_string(), 1)]));
        // The watch breaks; "a" is deleted meanwhile and "b" created: the relist drops "a".
        fold.apply(&mut store, Event::Init);
        fold.apply(&mut store, Event::InitApply(ev("b", Some(2))));
        let change = fold.apply(&mut store, Event::InitDone);
        let previous = BTreeMap::from([("a".to_string(), 1)]);
        assert_eq!(change, Some(Change::Relisted { previous }));
        assert_eq!(store, BTreeMap::from([("b".to_string(), 2)]));
    }

    #[test]
    fn applies_and_deletes_say_what_they_replaced() {
        let (mut fold, mut store) = (Fold::default(), BTreeMap::new());
        let applied = fold.apply(&mut store, Event::Apply(ev("a", Some(1))));
        assert_eq!(
            applied,
            Some(Change::Applied {
                key: "a".into(),
                old: None
            })
        );
        let applied = fold.apply(&mut store, Event::Apply(ev("a", Some(2))));
        assert_eq!(
            applied,
            Some(Change::Applied {
                key: "a".into(),
                old: Some(1)
            })
        );
        // An object that no longer makes a record (a Service become headless) leaves the store.
        let gone = fold.apply(&mut store, Event::Apply(ev("a", None)));
        assert_eq!(
            gone,
            Some(Change::Deleted {
                key: "a".into(),
                old: 2
            })
        );
        assert_eq!(fold.apply(&mut store, Event::Delete(ev("a", None))), None);
        assert_eq!(fold.apply(&mut store, Event::Apply((None, Some(3)))), None);
        assert!(store.is_empty());
    }
}
