//! What the HPA reads and writes through the API: the target's scale subresource, the pods its
//! selector picks, and their usage from metrics.k8s.io/v1beta1 PodMetrics.

use super::plan::{self, PodSample};
use crate::pods::{is_active, is_ready};
use crate::Error;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerSpec, MetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use keelson_apimachinery::quantity;
use kube::api::{Api, ListParams, PostParams};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// The workload an HPA scales: the kinds with a scale subresource Keelson serves.
pub enum Target {
    Deployment(Api<Deployment>, String),
    ReplicaSet(Api<ReplicaSet>, String),
    StatefulSet(Api<StatefulSet>, String),
    Unknown(String),
}

impl Target {
    pub fn new(client: &kube::Client, ns: &str, r: &CrossVersionObjectReference) -> Target {
        let (c, name) = (client.clone(), r.name.clone());
        match r.kind.as_str() {
            "Deployment" => Target::Deployment(Api::namespaced(c, ns), name),
            "ReplicaSet" => Target::ReplicaSet(Api::namespaced(c, ns), name),
            "StatefulSet" => Target::StatefulSet(Api::namespaced(c, ns), name),
            other => Target::Unknown(format!("{other}/{name}")),
        }
    }

    pub async fn get_scale(&self) -> Result<Scale, String> {
        let r = match self {
            Target::Deployment(a, n) => a.get_scale(n).await,
            Target::ReplicaSet(a, n) => a.get_scale(n).await,
            Target::StatefulSet(a, n) => a.get_scale(n).await,
            Target::Unknown(what) => return Err(format!("no scale subresource for {what}")),
        };
        r.map_err(|e| e.to_string())
    }

    /// Writes `replicas` through the scale subresource with the Scale read (an update, as
    /// upstream's: a concurrent change conflicts instead of being overwritten).
    pub async fn set_replicas(&self, mut scale: Scale, replicas: i32) -> Result<(), Error> {
        scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        let pp = PostParams::default();
        match self {
            Target::Deployment(a, n) => a.replace_scale(n, &pp, &scale).await.map(drop)?,
            Target::ReplicaSet(a, n) => a.replace_scale(n, &pp, &scale).await.map(drop)?,
            Target::StatefulSet(a, n) => a.replace_scale(n, &pp, &scale).await.map(drop)?,
            Target::Unknown(what) => return Err(Error::Invalid(format!("cannot scale {what}"))),
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct PodMetricsList {
    items: Vec<PodMetrics>,
}

#[derive(Deserialize)]
struct PodMetrics {
    metadata: kube::api::ObjectMeta,
    containers: Vec<ContainerMetrics>,
}

#[derive(Deserialize)]
struct ContainerMetrics {
    usage: BTreeMap<String, String>,
}

/// Each pod's usage per resource ("cpu" in cores, "memory" in bytes), by pod name.
async fn usage(
    client: &kube::Client,
    ns: &str,
    selector: &str,
) -> Result<HashMap<String, BTreeMap<String, f64>>, String> {
    let mut url = format!("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods");
    if !selector.is_empty() {
        url.push_str("?labelSelector=");
        url.push_str(&form_encode(selector));
    }
    let req = http::Request::get(url)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let list: PodMetricsList = client.request(req).await.map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .map(|pm| {
            let mut sums = BTreeMap::new();
            for c in &pm.containers {
                for (res, q) in &c.usage {
                    *sums.entry(res.clone()).or_insert(0.0) += quantity::parse(q).unwrap_or(0.0);
                }
            }
            (pm.metadata.name.unwrap_or_default(), sums)
        })
        .collect())
}

/// Percent-encodes a label selector for a query string.
fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The sum of a pod's containers' requests for `resource`; None when one has none.
fn request(pod: &Pod, resource: &str) -> Option<f64> {
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().try_fold(0.0, |sum, c| {
        let q = c.resources.as_ref()?.requests.as_ref()?.get(resource)?;
        Some(sum + quantity::parse(&q.0)?)
    })
}

/// The replicas every metric asks for (the largest wins), each metric's status, and the reason
/// for the Event; or (Event reason, message) when a metric cannot be computed.
pub async fn recommend(
    client: &kube::Client,
    ns: &str,
    selector: &str,
    current: i32,
    spec: &HorizontalPodAutoscalerSpec,
) -> Result<(i32, Vec<MetricStatus>, String), (&'static str, String)> {
    let failed = |e: String| ("FailedGetResourceMetric", e);
    let pods: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| failed(format!("unable to list pods: {e}")))?
        .items
        .into_iter()
        .filter(is_active)
        .collect();
    let usage = usage(client, ns, selector)
        .await
        .map_err(|e| failed(format!("unable to get metrics for resource: unable to fetch metrics from resource metrics API: {e}")))?;
    let default_cpu = [k8s_openapi::api::autoscaling::v2::MetricSpec {
        type_: "Resource".into(),
        resource: Some(k8s_openapi::api::autoscaling::v2::ResourceMetricSource {
            name: "cpu".into(),
            target: k8s_openapi::api::autoscaling::v2::MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(80),
                ..Default::default()
            },
        }),
        ..Default::default()
    }];
    // Upstream's default with no metrics given: 80% CPU utilization.
    let metrics = spec
        .metrics
        .as_deref()
        .filter(|m| !m.is_empty())
        .unwrap_or(&default_cpu);
    let (mut best, mut statuses, mut reason) = (i32::MIN, Vec::new(), String::new());
    for m in metrics {
        let Some(res) = m.resource.as_ref().filter(|_| m.type_ == "Resource") else {
            return Err((
                "FailedGetExternalMetric",
                format!("metric type {} is not supported", m.type_),
            ));
        };
        let target_value = res
            .target
            .average_value
            .as_ref()
            .and_then(|q| quantity::parse(&q.0));
        let utilization_target = res.target.average_utilization;
        let mut samples = Vec::new();
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let req = match (utilization_target, target_value) {
                (Some(_), _) => request(p, &res.name).ok_or_else(|| {
                    failed(format!(
                        "failed to get {} utilization: missing request for {} in pod {ns}/{name}",
                        res.name, res.name
                    ))
                })?,
                // AverageValue: each pod measured against the target value itself.
                (None, Some(v)) => v,
                (None, None) => {
                    return Err(failed(format!("invalid target for resource {}", res.name)))
                }
            };
            samples.push(PodSample {
                usage: usage.get(&name).and_then(|u| u.get(&res.name)).copied(),
                ready: is_ready(p),
                request: req,
                name,
            });
        }
        let pct = utilization_target.unwrap_or(100);
        let rec = plan::utilization_replicas(current, pct, &samples)
            .map_err(|e| failed(format!("failed to get {} utilization: {e}", res.name)))?;
        let average = if res.name == "cpu" {
            Quantity(format!("{}m", (rec.average * 1000.0).round() as i64))
        } else {
            Quantity(format!("{}", rec.average.round() as i64))
        };
        statuses.push(super::resource_status(
            &res.name,
            utilization_target.map(|_| rec.utilization),
            average,
        ));
        if rec.replicas > best {
            best = rec.replicas;
            let side = if rec.replicas > current {
                "above"
            } else {
                "below"
            };
            reason = match utilization_target {
                Some(_) => format!(
                    "{} resource utilization (percentage of request) {side} target",
                    res.name
                ),
                None => format!("{} resource {side} target", res.name),
            };
        }
    }
    Ok((best.max(0), statuses, reason))
}
