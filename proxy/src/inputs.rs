//! The proxy's inputs: watches on Services, EndpointSlices and its own Node, each kept as a
//! small record per object (see `from_k8s`), not the whole object.
//!
//! Why not `keelson_daemon::reflect`: its stores hold whole objects, which for 10,000 Services
//! and their slices would cost tens of MiB (the proxy's target is 50 MiB in all), and every sync
//! would convert every object again: `keelson_daemon::inform` keeps the records, and every change
//! wakes the loop through the daemons' `Changes`.

use std::net::Ipv4Addr;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_daemon::{inform, namespaced_name, Changes, Informer};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::announce::{self, elect::Speaker, lease, View};
use crate::from_k8s::{self, build_model_from_infos, ServiceInfo, SliceInfo};
use crate::model::ProxyModel;
use crate::sync_loop::ModelSource;

pub struct KubeInputs {
    node_name: String,
    services: Informer<ServiceInfo>,
    slices: Informer<SliceInfo>,
    node: Informer<Vec<Ipv4Addr>>,
    /// The load-balancer speakers' Leases, watched when this node announces.
    speakers: Option<Informer<Speaker>>,
}

/// Starts one watch per input; every change notifies `changes`. With `speakers`, the speakers'
/// Leases are watched too (each renewed every 1.5 s: they wake no rule sync).
pub fn start(client: Client, node_name: &str, changes: &Changes, speakers: bool) -> KubeInputs {
    let speakers = speakers.then(|| {
        inform(
            Api::<Lease>::namespaced(client.clone(), lease::NAMESPACE),
            watcher::Config::default().labels(&format!("{}={}", lease::LABEL, lease::LABEL_VALUE)),
            namespaced_name,
            |l| lease::speaker(&l),
            |_| std::future::ready(()),
        )
    });
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
        speakers,
    }
}

impl View for KubeInputs {
    fn node_ips(&self) -> Vec<Ipv4Addr> {
        self.node
            .read()
            .values()
            .next()
            .cloned()
            .unwrap_or_default()
    }

    fn load_balancer_addresses(&self) -> Vec<announce::elect::Address> {
        let services = self.services.read();
        let slices = self.slices.read();
        announce::addresses(services.values(), slices.values())
    }

    fn speakers(&self) -> Vec<Speaker> {
        self.speakers
            .as_ref()
            .map(|i| i.read().values().cloned().collect())
            .unwrap_or_default()
    }
}

impl ModelSource for KubeInputs {
    fn ready(&self) -> bool {
        self.services.is_synced() && self.slices.is_synced() && self.node.is_synced()
    }

    fn snapshot(&self) -> ProxyModel {
        let services = self.services.read();
        let slices = self.slices.read();
        build_model_from_infos(
            &self.node_name,
            self.node_ips(),
            services.values(),
            slices.values(),
        )
    }
}
