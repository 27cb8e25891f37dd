//! What the Node and RBAC authorizers read, kept from the store's watch: the RBAC index and
//! the graph of pods bound to nodes. Each request first takes in the changes committed so far
//! (without waiting), so a write that was answered is in effect for the next request; the
//! store is listed only at start, when the watch history was outrun, and (RBAC objects only,
//! a few dozen) after an RBAC change.

use super::node::Graph;
use super::rbac::{Index, RBAC_GROUP};
use futures::FutureExt;
use keelson_apiserver_registry::resources;
use keelson_apiserver_store::{EventType, Store, Subscription};
use std::sync::{Arc, Mutex, MutexGuard};

const PODS: &str = "/core/pods/";
const CLAIMS: &str = "/core/persistentvolumeclaims/";
const VOLUMES: &str = "/core/persistentvolumes/";

fn rbac_prefix() -> String {
    format!("/{RBAC_GROUP}/")
}

struct State {
    sub: Option<Subscription>,
    rbac: Arc<Index>,
    graph: Graph,
}

pub struct Watched {
    store: Store,
    /// Whether the pod graph is kept (the Node authorizer is on).
    graph: bool,
    state: Mutex<State>,
}

impl Watched {
    pub fn new(store: Store, graph: bool) -> Watched {
        let w = Watched {
            store,
            graph,
            state: Mutex::new(State {
                sub: None,
                rbac: Arc::default(),
                graph: Graph::default(),
            }),
        };
        w.reload(&mut w.lock());
        w
    }

    /// Takes in the committed changes every second even when no request needs them (the
    /// admin's requests skip the authorizers), so the watch never falls behind its history and
    /// no request pays for a reload. Stops when the authorizer is dropped.
    pub fn keep_up(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tick.tick().await;
                let Some(w) = weak.upgrade() else { return };
                let mut st = w.lock();
                w.catch_up(&mut st);
            }
        });
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The RBAC index as of every committed write.
    pub fn rbac(&self) -> Arc<Index> {
        let mut st = self.lock();
        self.catch_up(&mut st);
        st.rbac.clone()
    }

    /// Runs `f` over the pod graph as of every committed write.
    pub fn with_graph<R>(&self, f: impl FnOnce(&Graph) -> R) -> R {
        let mut st = self.lock();
        self.catch_up(&mut st);
        f(&st.graph)
    }

    /// Everything from the store: the RBAC index, the graph, and a watch from then on.
    fn reload(&self, st: &mut State) {
        let rev = self.store.current_rev();
        // Subscribed first: whatever commits while listing comes again through the watch,
        // and applying a pod's state twice, in order, ends at the same graph.
        st.sub = self.store.watch("/", Some(rev)).ok().map(|(_, sub)| sub);
        st.rbac = Arc::new(self.rbac_index());
        st.graph = Graph::default();
        if self.graph {
            let (pods, _) = self.store.list_keyed(PODS);
            for (key, e) in pods {
                st.graph.set_pod(&key, Some(&e.value()));
            }
            let (claims, _) = self.store.list_keyed(CLAIMS);
            for (key, e) in claims {
                set_claim(&mut st.graph, &key, Some(&e.value()));
            }
            let (volumes, _) = self.store.list_keyed(VOLUMES);
            for (key, e) in volumes {
                st.graph.set_volume(volume_name(&key), Some(&e.value()));
            }
        }
    }

    fn rbac_index(&self) -> Index {
        let (objects, _) = self.store.list_keyed(&rbac_prefix());
        let parsed: Vec<(&'static str, Arc<serde_json::Value>)> = objects
            .iter()
            .filter_map(|(key, e)| {
                let res = resources::RESOURCES
                    .iter()
                    .find(|r| key.starts_with(&r.key_prefix()))?;
                Some((res.kind, e.value()))
            })
            .collect();
        Index::build(parsed.iter().map(|(k, v)| (*k, v.as_ref())))
    }

    /// Applies the events committed since the last call, without waiting for more.
    fn catch_up(&self, st: &mut State) {
        let prefix = rbac_prefix();
        let mut rbac_changed = false;
        loop {
            let Some(sub) = st.sub.as_mut() else {
                return self.reload(st);
            };
            let event = match sub.next().now_or_never() {
                None => break,
                Some(Some(Ok(e))) => e,
                // Fell behind the watch history, or the store is closing: start over.
                Some(Some(Err(_))) | Some(None) => {
                    tracing::debug!("authorizer watch outrun; reloading RBAC and the pod graph");
                    return self.reload(st);
                }
            };
            if event.key.starts_with(&prefix) {
                rbac_changed = true;
            } else if self.graph && event.key.starts_with(PODS) {
                let pod = match event.kind {
                    EventType::Deleted => None,
                    _ => Some(event.entry.value()),
                };
                st.graph.set_pod(&event.key, pod.as_deref());
            } else if self.graph && event.key.starts_with(CLAIMS) {
                let claim = match event.kind {
                    EventType::Deleted => None,
                    _ => Some(event.entry.value()),
                };
                set_claim(&mut st.graph, &event.key, claim.as_deref());
            } else if self.graph && event.key.starts_with(VOLUMES) {
                let volume = match event.kind {
                    EventType::Deleted => None,
                    _ => Some(event.entry.value()),
                };
                st.graph
                    .set_volume(volume_name(&event.key), volume.as_deref());
            }
        }
        if rbac_changed {
            st.rbac = Arc::new(self.rbac_index());
        }
    }
}

/// A volume's store key is /core/persistentvolumes//<name>: cluster-scoped, so its namespace
/// part is empty.
fn volume_name(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// A claim's store key is /core/persistentvolumeclaims/<namespace>/<name>.
fn set_claim(graph: &mut Graph, key: &str, claim: Option<&serde_json::Value>) {
    let rest = key.strip_prefix(CLAIMS).unwrap_or(key);
    if let Some((ns, name)) = rest.split_once('/') {
        graph.set_claim(ns, name, claim);
    }
}

#[cfg(test)]
mod tests;
