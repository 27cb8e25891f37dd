//! The proxy's inputs: watches on Services, EndpointSlices and its own Node, each kept as a
//! small record per object (see `from_k8s`), not the whole object.
//!
//! Why not `keelson_daemon::reflect`: its stores hold whole objects, which for 10,000 Services
//! and their slices would cost tens of MiB (the proxy's target is 50 MiB in all), and every sync
//! would convert every object again: `keelson_daemon::inform` keeps the records, and every change
//! wakes the loop through the daemons' `Changes`.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_daemon::{inform, namespaced_name, Changes, Informer};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::from_k8s::{self, build_model_from_infos, ServiceInfo, SliceInfo};
use crate::model::ProxyModel;
use crate::sync_loop::ModelSource;

pub struct KubeInputs {
    node_name: String,
    services: Informer<ServiceInfo>,
    slices: Informer<SliceInfo>,
    node: Informer<Vec<Ipv4Addr>>,
}

/// Starts one watch per input; every change notifies `changes`.
pub fn start(client: Client, node_name: &str, changes: &Changes) -> KubeInputs {
    let services = inform(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        namespaced_name,
        |s| from_k8s::service_info(&s),
        changes.on_change(),
    );
    let slices = inform(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default(),
        namespaced_name,
        |s| from_k8s::slice_info(&s),
        changes.on_change(),
    );
    // The field selector asks for this node only; a server that ignores selectors (an
    // emulator) sends every node, so the name is checked here too.
    let own_name = node_name.to_string();
    let node = inform(
        Api::<Node>::all(client),
        watcher::Config::default().fields(&format!("metadata.name={node_name}")),
        namespaced_name,
        move |n| (n.metadata.name.as_deref() == Some(&own_name)).then(|| from_k8s::node_ips(&n)),
        changes.on_change(),
    );
    KubeInputs {
        node_name: node_name.to_string(),
        services,
        slices,
        node,
    }
}

impl ModelSource for KubeInputs {
    fn ready(&self) -> bool {
        self.services.is_synced() && self.slices.is_synced() && self.node.is_synced()
    }

    fn snapshot(&self) -> ProxyModel {
        let services = self.services.read();
        let slices = self.slices.read();
        let node_ips = self
            .node
            .read()
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
