//! The proxy's inputs: reflectors on Services, EndpointSlices and its own Node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use tokio::sync::Notify;

use crate::from_k8s::build_model;
use crate::model::ProxyModel;
use crate::sync_loop::ModelSource;

pub struct KubeInputs {
    node_name: String,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    nodes: Store<Node>,
    ready: [Arc<AtomicBool>; 3],
}

/// Starts one reflector per input; every event notifies `changed`.
pub fn start(client: Client, node_name: &str, changed: Arc<Notify>) -> KubeInputs {
    let services = watch::<Service>(
        Api::all(client.clone()),
        watcher::Config::default(),
        &changed,
    );
    let slices = watch::<EndpointSlice>(
        Api::all(client.clone()),
        watcher::Config::default(),
        &changed,
    );
    let nodes = watch::<Node>(
        Api::all(client),
        watcher::Config::default().fields(&format!("metadata.name={node_name}")),
        &changed,
    );
    KubeInputs {
        node_name: node_name.to_string(),
        services: services.0,
        slices: slices.0,
        nodes: nodes.0,
        ready: [services.1, slices.1, nodes.1],
    }
}

fn watch<K>(api: Api<K>, cfg: watcher::Config, changed: &Arc<Notify>) -> (Store<K>, Arc<AtomicBool>)
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + serde::de::DeserializeOwned + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store::<K>();
    let ready = Arc::new(AtomicBool::new(false));
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = reflector::reflector(writer, watcher(api, cfg)).default_backoff();
    let notify = changed.clone();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => notify.notify_one(),
                Err(e) => tracing::warn!(kind = %kind, error = %e, "watch error (retrying)"),
            }
        }
    });
    let r = reader.clone();
    let flag = ready.clone();
    let notify = changed.clone();
    tokio::spawn(async move {
        if r.wait_until_ready().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
            notify.notify_one();
        }
    });
    (reader, ready)
}

impl ModelSource for KubeInputs {
    fn ready(&self) -> bool {
        self.ready.iter().all(|r| r.load(Ordering::SeqCst))
    }

    fn snapshot(&self) -> ProxyModel {
        let services = self.services.state();
        let slices = self.slices.state();
        let node = self
            .nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.node_name.as_str()));
        let svc_refs: Vec<&Service> = services.iter().map(|s| s.as_ref()).collect();
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        build_model(&self.node_name, node.as_deref(), &svc_refs, &slice_refs)
    }
}
