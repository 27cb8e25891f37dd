//! The proxy's inputs: watches on Services, EndpointSlices and its own Node, each kept as a
//! small record per object (see `from_k8s`), not the whole object.
//!
//! Why not `keelson_daemon::reflect`: its stores hold whole objects, which for 10,000 Services
//! and their slices would cost tens of MiB (the proxy's target is 50 MiB in all), and every sync
//! would convert every object again. Events still wake the loop through the daemons' `Changes`.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_daemon::Changes;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};

use crate::from_k8s::{self, build_model_from_infos, ServiceInfo, SliceInfo};
use crate::model::ProxyModel;
use crate::sync_loop::ModelSource;

/// Records of one kind, keyed by namespace/name, and whether the first list completed.
struct Compact<T> {
    items: RwLock<HashMap<String, T>>,
    ready: AtomicBool,
}

impl<T> Default for Compact<T> {
    fn default() -> Self {
        Compact {
            items: RwLock::new(HashMap::new()),
            ready: AtomicBool::new(false),
        }
    }
}

pub struct KubeInputs {
    node_name: String,
    services: Arc<Compact<ServiceInfo>>,
    slices: Arc<Compact<SliceInfo>>,
    node: Arc<Compact<Vec<Ipv4Addr>>>,
}

/// Starts one watch per input; every event notifies `changes`.
pub fn start(client: Client, node_name: &str, changes: &Changes) -> KubeInputs {
    let services = Arc::new(Compact::default());
    let slices = Arc::new(Compact::default());
    let node = Arc::new(Compact::default());
    watch::<Service, _>(
        Api::all(client.clone()),
        watcher::Config::default(),
        services.clone(),
        from_k8s::service_info,
        changes.clone(),
    );
    watch::<EndpointSlice, _>(
        Api::all(client.clone()),
        watcher::Config::default(),
        slices.clone(),
        from_k8s::slice_info,
        changes.clone(),
    );
    watch::<Node, _>(
        Api::all(client),
        watcher::Config::default().fields(&format!("metadata.name={node_name}")),
        node.clone(),
        |n: &Node| Some(from_k8s::node_ips(n)),
        changes.clone(),
    );
    KubeInputs {
        node_name: node_name.to_string(),
        services,
        slices,
        node,
    }
}

fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

fn watch<K, T>(
    api: Api<K>,
    cfg: watcher::Config,
    store: Arc<Compact<T>>,
    convert: fn(&K) -> Option<T>,
    changes: Changes,
) where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + serde::de::DeserializeOwned + 'static,
    K::DynamicType: Default,
    T: Send + Sync + 'static,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    tokio::spawn(async move {
        let stream = watcher(api, cfg).default_backoff();
        futures::pin_mut!(stream);
        // A (re)list is collected apart and swapped in whole, so deletions missed while the
        // watch was down disappear too.
        let mut relist: Option<HashMap<String, T>> = None;
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "watch error (retrying)");
                    continue;
                }
            };
            let mut items = match store.items.write() {
                Ok(i) => i,
                Err(p) => p.into_inner(),
            };
            match ev {
                watcher::Event::Init => relist = Some(HashMap::new()),
                watcher::Event::InitApply(obj) => {
                    if let (Some(buf), Some(v)) = (relist.as_mut(), convert(&obj)) {
                        buf.insert(key(&obj), v);
                    }
                }
                watcher::Event::InitDone => {
                    if let Some(buf) = relist.take() {
                        *items = buf;
                    }
                    store.ready.store(true, Ordering::SeqCst);
                }
                watcher::Event::Apply(obj) => match convert(&obj) {
                    Some(v) => {
                        items.insert(key(&obj), v);
                    }
                    // e.g. a Service that became headless
                    None => {
                        items.remove(&key(&obj));
                    }
                },
                watcher::Event::Delete(obj) => {
                    items.remove(&key(&obj));
                }
            }
            drop(items);
            changes.notify();
        }
    });
}

fn read<T>(c: &RwLock<HashMap<String, T>>) -> std::sync::RwLockReadGuard<'_, HashMap<String, T>> {
    match c.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl ModelSource for KubeInputs {
    fn ready(&self) -> bool {
        self.services.ready.load(Ordering::SeqCst)
            && self.slices.ready.load(Ordering::SeqCst)
            && self.node.ready.load(Ordering::SeqCst)
    }

    fn snapshot(&self) -> ProxyModel {
        let services = read(&self.services.items);
        let slices = read(&self.slices.items);
        let node_ips = read(&self.node.items)
            .values()
            .next()
            .cloned()
            .unwrap_or_default();
        build_model_from_infos(
            &self.node_name,
            node_ips,
            services.values(),
            slices.values(),
        )
    }
}
