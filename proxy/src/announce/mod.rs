//! LoadBalancer addresses on the node's segment (`--announce-load-balancers`), as MetalLB's
//! layer-2 mode: each address in a Service's status.loadBalancer.ingress is answered for by one
//! node, elected among the live speakers (`elect`), which replies to ARP requests for it and
//! sends gratuitous ARP when it takes it over (`arp`). Traffic then reaches that node and the
//! proxy's rules send it on, as for an external IP. Speakers know each other through Leases
//! (`lease`); one that cannot renew its own stops answering before the others take over.

pub mod arp;
pub mod elect;
pub mod lease;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use keelson_daemon::events::{EventType, Recorder, Reporter};
use keelson_daemon::Shutdown;
use kube::api::{Api, DeleteParams};

use crate::from_k8s::{ServiceInfo, SliceInfo};
use crate::metrics::Metrics;
use elect::{winner, Address, Liveness, Speaker};

/// What the speaker reads of the cluster (the proxy's watches, `inputs::KubeInputs`).
pub trait View: Send + Sync {
    /// The node's InternalIP and ExternalIP addresses, once its Node is listed.
    fn node_ips(&self) -> Vec<Ipv4Addr>;
    /// Every LoadBalancer ingress address.
    fn load_balancer_addresses(&self) -> Vec<Address>;
    /// The speakers whose Leases are listed.
    fn speakers(&self) -> Vec<Speaker>;
}

/// How often the elections are run again (the Leases' expiry is judged on this tick).
const TICK: Duration = Duration::from_millis(500);

/// The addresses to announce: every Service's LoadBalancer ingress IPs, with the nodes running
/// a ready endpoint for those whose externalTrafficPolicy is Local.
pub fn addresses<'a>(
    services: impl Iterator<Item = &'a ServiceInfo>,
    slices: impl Iterator<Item = &'a SliceInfo>,
) -> Vec<Address> {
    let mut ready_on: BTreeMap<(&str, &str), BTreeSet<String>> = BTreeMap::new();
    for s in slices {
        let nodes = ready_on
            .entry((s.namespace.as_str(), s.service.as_str()))
            .or_default();
        nodes.extend(
            s.endpoints
                .iter()
                .filter(|e| e.ready)
                .filter_map(|e| e.node_name.clone()),
        );
    }
    let mut out = Vec::new();
    for svc in services {
        let local_nodes = svc.external_local.then(|| {
            ready_on
                .get(&(svc.namespace.as_str(), svc.name.as_str()))
                .cloned()
                .unwrap_or_default()
        });
        out.extend(svc.load_balancer_ips.iter().map(|ip| Address {
            ip: *ip,
            service: format!("{}/{}", svc.namespace, svc.name),
            local_nodes: local_nodes.clone(),
        }));
    }
    out
}

/// What the speaker is told to use.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `--announce-interface`; by default the interface holding the node's InternalIP.
    pub interface: Option<String>,
}

/// Announces until `shutdown`, then stops answering and deletes its Lease, so that the other
/// speakers take its addresses over at once instead of after the Lease's expiry.
pub async fn run(
    client: kube::Client,
    node: String,
    inputs: Arc<dyn View>,
    cfg: Config,
    shutdown: Shutdown,
    metrics: Arc<Metrics>,
) {
    let Some(responder) = responder(inputs.as_ref(), &cfg, &shutdown).await else {
        return;
    };
    let link = responder.link().clone();
    let nets: Vec<String> = link.networks.iter().map(|n| n.to_string()).collect();
    tracing::info!(interface = %link.name, networks = ?nets, "announcing LoadBalancer addresses (layer 2, ARP)");
    let api = Api::<Lease>::namespaced(client.clone(), lease::NAMESPACE);
    let events = Recorder::new(
        client,
        Reporter {
            component: "keelson-speaker".into(),
            host: Some(node.clone()),
        },
    );
    let mut live = Liveness::default();
    let mut mine: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    let mut renewed: Option<Instant> = None;
    let mut next_renewal = Instant::now();
    let mut renewal_failing = false;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => break,
        }
        if Instant::now() >= next_renewal {
            next_renewal = Instant::now() + lease::RENEW_EVERY;
            let result = tokio::time::timeout(
                lease::RENEW_EVERY,
                lease::renew(&api, &node, &link.networks),
            )
            .await;
            match result {
                Ok(Ok(())) => {
                    renewed = Some(Instant::now());
                    if std::mem::take(&mut renewal_failing) {
                        tracing::info!("speaker Lease renewed again");
                    }
                }
                Ok(Err(e)) if !renewal_failing => {
                    renewal_failing = true;
                    tracing::warn!(error = %e, "cannot renew the speaker Lease; retrying");
                }
                Err(_) if !renewal_failing => {
                    renewal_failing = true;
                    tracing::warn!("renewing the speaker Lease timed out; retrying");
                }
                _ => {}
            }
        }
        // Unrenewed for a Lease's duration, this node counts as gone to the others, which take
        // its addresses over: it stops answering first, so that two nodes never both do.
        let fenced = renewed.is_none_or(|t| t.elapsed() >= lease::DURATION);
        let speakers = inputs.speakers();
        let alive = live.alive(&speakers, Instant::now());
        let want: BTreeMap<Ipv4Addr, String> = if fenced {
            BTreeMap::new()
        } else {
            inputs
                .load_balancer_addresses()
                .into_iter()
                .filter(|a| winner(a, &alive) == Some(node.as_str()))
                .map(|a| (a.ip, a.service))
                .collect()
        };
        for (ip, service) in &want {
            if mine.get(ip) == Some(service) {
                continue;
            }
            responder.announce(*ip);
            tracing::info!(%ip, %service, interface = %link.name, "announcing");
            events.publish_ref(
                service_ref(service),
                EventType::Normal,
                "nodeAssigned",
                format!("announcing from node \"{node}\" with protocol \"layer2\""),
            );
        }
        for (ip, service) in &mine {
            if !want.contains_key(ip) {
                responder.withdraw(*ip);
                tracing::info!(%ip, %service, fenced, "no longer announcing");
            }
        }
        mine = want;
        metrics
            .announced
            .set(i64::try_from(mine.len()).unwrap_or(i64::MAX));
    }
    for ip in mine.keys() {
        responder.withdraw(*ip);
    }
    let name = format!("{}{node}", lease::PREFIX);
    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
        tracing::warn!(error = %e, "speaker Lease not deleted; the others take over when it expires");
    }
}

/// Waits for the node's addresses, then opens the ARP socket on its interface (retrying, with
/// the reason logged, while that fails).
async fn responder(inputs: &dyn View, cfg: &Config, shutdown: &Shutdown) -> Option<arp::Responder> {
    let mut said = String::new();
    loop {
        let node_ips = inputs.node_ips();
        let attempt = if node_ips.is_empty() && cfg.interface.is_none() {
            Err("the node's addresses are not known yet".to_string())
        } else {
            arp::find_link(cfg.interface.as_deref(), &node_ips)
                .and_then(arp::Responder::start)
                .map_err(|e| e.to_string())
        };
        match attempt {
            Ok(r) => return Some(r),
            // Said once per reason: a node without an Ethernet segment keeps retrying quietly.
            Err(why) if why != said => {
                tracing::warn!("LoadBalancer addresses not announced: {why}; retrying every 5 s");
                said = why;
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = shutdown.requested() => return None,
        }
    }
}

fn service_ref(service: &str) -> ObjectReference {
    let (namespace, name) = service.split_once('/').unwrap_or(("", service));
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..ObjectReference::default()
    }
}
