//! The EndpointSlice controller: for each Service with a selector, the Pods it selects (with an
//! IP) as endpoints, grouped by the ports their targetPorts resolve to, with ready, serving and
//! terminating conditions. Slices are named from the Service and the port set, so a sync is
//! idempotent; slices no longer wanted are deleted.

use crate::api::delete_if_present;
use crate::pods::{is_controlled_by, is_ready, owner_ref};
use crate::{Ctx, Error};
use keelson_apimachinery::hash::fnv1a_32;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "endpointslice-controller";

pub use keelson_apimachinery::well_known::{
    ENDPOINTSLICE_CONTROLLER as CONTROLLER, MANAGED_BY_LABEL as MANAGED_BY,
    SERVICE_NAME_LABEL as SERVICE_NAME,
};

/// Whether a Service's selector picks this Pod.
pub fn selects(svc: &Service, pod: &Pod) -> bool {
    let Some(sel) = svc
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
    else {
        return false;
    };
    svc.namespace() == pod.namespace() && sel.iter().all(|(k, v)| pod.labels().get(k) == Some(v))
}

/// The port a Pod serves a Service port on, or None when a named targetPort is not declared.
fn resolve(pod: &Pod, target: Option<&IntOrString>, port: i32, protocol: &str) -> Option<i32> {
    match target {
        None => Some(port),
        Some(IntOrString::Int(p)) => Some(*p),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| {
                p.name.as_deref() == Some(name.as_str())
                    && p.protocol.as_deref().unwrap_or("TCP") == protocol
            })
            .map(|p| p.container_port),
    }
}

/// The conditions of a Pod's endpoint, as upstream's controller sets them: `serving` follows
/// the Pod's Ready condition; `terminating` is set from the moment the Pod has a
/// deletionTimestamp, and `ready` turns false then, so that proxies and ingress controllers stop
/// sending new connections to it while it drains. A Service with publishNotReadyAddresses
/// (peer discovery of StatefulSets) wants every address: its endpoints stay ready.
pub fn conditions(svc: &Service, pod: &Pod) -> EndpointConditions {
    let serving = is_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish_not_ready = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    EndpointConditions {
        ready: Some(publish_not_ready || (serving && !terminating)),
        serving: Some(serving),
        terminating: Some(terminating),
    }
}

/// The pod's spec.hostname when its spec.subdomain names this Service (upstream's
/// ShouldSetHostname): cluster DNS then answers `<hostname>.<service>.<ns>.svc`, the stable
/// name of a StatefulSet's pod behind its headless Service.
fn hostname(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.clone().filter(|h| !h.is_empty())?;
    let same_ns = svc.metadata.namespace == pod.metadata.namespace;
    (same_ns && spec.subdomain.is_some() && spec.subdomain == svc.metadata.name).then_some(hostname)
}

fn endpoint(svc: &Service, pod: &Pod) -> Option<Endpoint> {
    let ip = pod
        .status
        .as_ref()?
        .pod_ip
        .clone()
        .filter(|ip| !ip.is_empty())?;
    Some(Endpoint {
        addresses: vec![ip],
        conditions: Some(conditions(svc, pod)),
        hostname: hostname(svc, pod),
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn short_hash(s: &str) -> String {
    format!("{:05x}", fnv1a_32(s.as_bytes()) & 0xfffff)
}

/// The slices a Service should have, given the Pods in its namespace.
pub fn desired(svc: &Service, pods: &[Pod]) -> Vec<EndpointSlice> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let ports = spec.ports.clone().unwrap_or_default();
    let mut groups: BTreeMap<Vec<(String, String, i32)>, Vec<Endpoint>> = BTreeMap::new();
    let mut selected: Vec<&Pod> = pods
        .iter()
        .filter(|p| selects(svc, p))
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    selected.sort_by_key(|p| p.name_any());
    for pod in selected {
        let Some(ep) = endpoint(svc, pod) else {
            continue;
        };
        let mut set = Vec::new();
        for p in &ports {
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            if let Some(port) = resolve(pod, p.target_port.as_ref(), p.port, &proto) {
                set.push((p.name.clone().unwrap_or_default(), proto, port));
            }
        }
        groups.entry(set).or_default().push(ep);
    }
    let name = svc.name_any();
    groups
        .into_iter()
        .map(|(set, endpoints)| {
            let key = format!("{set:?}");
            let ports = set
                .into_iter()
                .map(|(n, proto, port)| EndpointPort {
                    name: Some(n),
                    protocol: Some(proto),
                    port: Some(port),
                    app_protocol: None,
                })
                .collect();
            let mut labels = svc.labels().clone();
            labels.insert(SERVICE_NAME.into(), name.clone());
            labels.insert(MANAGED_BY.into(), CONTROLLER.into());
            EndpointSlice {
                metadata: kube::api::ObjectMeta {
                    name: Some(format!("{name}-{}", short_hash(&key))),
                    namespace: svc.namespace(),
                    labels: Some(labels),
                    owner_references: Some(vec![owner_ref(
                        "v1",
                        "Service",
                        &name,
                        &svc.uid().unwrap_or_default(),
                    )]),
                    ..Default::default()
                },
                address_type: "IPv4".into(),
                endpoints: Some(endpoints),
                ports: Some(ports),
            }
        })
        .collect()
}

pub async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = svc.namespace().unwrap_or_default();
    let has_selector = svc
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|s| !s.is_empty());
    if svc.metadata.deletion_timestamp.is_some() || !has_selector {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let all = pods.list(&ListParams::default()).await?.items;
    let want = desired(&svc, &all);
    let have = slices
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME}={}", svc.name_any())))
        .await?
        .items;
    if let Err(e) = write_slices(&slices, &want, &have, &svc.uid().unwrap_or_default()).await {
        let message = format!(
            "Error updating Endpoint Slices for Service {ns}/{}: {e}",
            svc.name_any()
        );
        ctx.events.reporting(COMPONENT).publish(
            svc.as_ref(),
            EventType::Warning,
            "FailedToUpdateEndpointSlices",
            message,
        );
        return Err(e.into());
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Creates, updates and deletes this Service's slices to match `want`.
async fn write_slices(
    slices: &Api<EndpointSlice>,
    want: &[EndpointSlice],
    have: &[EndpointSlice],
    uid: &str,
) -> Result<(), kube::Error> {
    for s in want {
        let name = s.name_any();
        match have.iter().find(|h| h.name_any() == name) {
            None => {
                slices.create(&PostParams::default(), s).await?;
            }
            Some(h)
                if h.endpoints != s.endpoints || h.ports != s.ports || h.labels() != s.labels() =>
            {
                let patch = serde_json::json!({ "metadata": { "labels": s.labels() }, "endpoints": s.endpoints, "ports": s.ports });
                slices
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            Some(_) => {}
        }
    }
    for h in have
        .iter()
        .filter(|h| is_controlled_by(*h, uid) && !want.iter().any(|w| w.name_any() == h.name_any()))
    {
        delete_if_present(slices, &h.name_any(), &DeleteParams::default()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::pod;

    fn svc(target: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web", "namespace": "default", "uid": "s1" },
            "spec": { "selector": { "app": "web" }, "ports": [{ "name": "http", "port": 80, "targetPort": target, "protocol": "TCP" }] },
        }))
        .unwrap()
    }

    fn with_port(mut p: Pod, name: &str, port: i32) -> Pod {
        p.spec.as_mut().unwrap().containers[0].ports = Some(vec![serde_json::from_value(
            serde_json::json!({"name": name, "containerPort": port}),
        )
        .unwrap()]);
        p
    }

    #[test]
    fn endpoints_carry_the_hostname_of_pods_whose_subdomain_is_the_service() {
        let named = |hostname: Option<&str>, subdomain: Option<&str>| {
            let mut p = pod("a", true, "Running");
            let spec = p.spec.as_mut().unwrap();
            spec.hostname = hostname.map(String::from);
            spec.subdomain = subdomain.map(String::from);
            p
        };
        let service = svc(serde_json::json!(80));
        let host = |p: Pod| endpoint(&service, &p).and_then(|e| e.hostname);
        assert_eq!(
            host(named(Some("web-0"), Some("web"))),
            Some("web-0".into())
        );
        assert_eq!(host(named(Some("web-0"), Some("other"))), None);
        assert_eq!(host(named(Some("web-0"), None)), None);
        assert_eq!(host(named(None, Some("web"))), None);
        let mut elsewhere = named(Some("web-0"), Some("web"));
        elsewhere.metadata.namespace = Some("other".into());
        assert_eq!(host(elsewhere), None);
    }

    #[test]
    fn ready_and_unready_pods_with_resolved_named_ports() {
        let pods = vec![
            with_port(pod("a", true, "Running"), "http", 8080),
            with_port(pod("bb", false, "Running"), "http", 8080),
        ];
        let slices = desired(&svc(serde_json::json!("http")), &pods);
        assert_eq!(slices.len(), 1);
        let s = &slices[0];
        assert_eq!(s.ports.as_ref().unwrap()[0].port, Some(8080));
        assert_eq!(s.labels()[SERVICE_NAME], "web");
        let ready: Vec<_> = s
            .endpoints
            .iter()
            .flatten()
            .map(|e| e.conditions.as_ref().unwrap().ready)
            .collect();
        assert_eq!(ready, [Some(true), Some(false)]);
        assert_eq!(
            s.endpoints.as_ref().unwrap()[0]
                .target_ref
                .as_ref()
                .unwrap()
                .name
                .as_deref(),
            Some("a")
        );
    }

    fn terminating(mut p: Pod) -> Pod {
        p.metadata.deletion_timestamp =
            serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap();
        p
    }

    /// (ready, serving, terminating) of the only endpoint of `svc` over `pod`.
    fn conds(svc: &Service, pod: Pod) -> (Option<bool>, Option<bool>, Option<bool>) {
        let slices = desired(svc, &[pod]);
        let eps = slices[0].endpoints.as_ref().unwrap();
        assert_eq!(eps.len(), 1);
        let c = eps[0].conditions.clone().unwrap();
        (c.ready, c.serving, c.terminating)
    }

    #[test]
    fn endpoint_conditions_follow_readiness_and_deletion_as_upstream() {
        let s = svc(serde_json::json!(8080));
        let t = Some(true);
        let f = Some(false);
        assert_eq!(conds(&s, pod("a", true, "Running")), (t, t, f));
        assert_eq!(conds(&s, pod("a", false, "Running")), (f, f, f));
        // Deleted with a grace period: out of new traffic at once, still serving while it drains.
        assert_eq!(conds(&s, terminating(pod("a", true, "Running"))), (f, t, t));
        assert_eq!(
            conds(&s, terminating(pod("a", false, "Running"))),
            (f, f, t)
        );
    }

    #[test]
    fn publish_not_ready_addresses_keeps_every_endpoint_ready() {
        let mut s = svc(serde_json::json!(8080));
        s.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let t = Some(true);
        let f = Some(false);
        assert_eq!(conds(&s, pod("a", false, "Running")), (t, f, f));
        assert_eq!(conds(&s, terminating(pod("a", true, "Running"))), (t, t, t));
        assert_eq!(
            conds(&s, terminating(pod("a", false, "Running"))),
            (t, f, t)
        );
    }

    #[test]
    fn finished_pods_and_pods_without_an_ip_are_left_out() {
        let mut no_ip = pod("new", false, "Pending");
        no_ip.status.as_mut().unwrap().pod_ip = None;
        let slices = desired(
            &svc(serde_json::json!(8080)),
            &[
                terminating(pod("a", true, "Running")),
                pod("done", true, "Succeeded"),
                pod("oops", true, "Failed"),
                no_ip,
            ],
        );
        let names: Vec<_> = slices
            .iter()
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter_map(|e| e.target_ref.as_ref()?.name.clone())
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn pods_with_different_ports_get_separate_slices_with_stable_names() {
        let pods = vec![
            with_port(pod("a", true, "Running"), "http", 8080),
            with_port(pod("bb", true, "Running"), "http", 9090),
        ];
        let s1 = desired(&svc(serde_json::json!("http")), &pods);
        let s2 = desired(&svc(serde_json::json!("http")), &pods);
        assert_eq!(s1.len(), 2);
        assert_eq!(
            s1.iter().map(|s| s.name_any()).collect::<Vec<_>>(),
            s2.iter().map(|s| s.name_any()).collect::<Vec<_>>()
        );
    }
}
