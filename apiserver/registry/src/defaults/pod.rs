//! Pod and pod template defaults (SetDefaults_Pod, SetDefaults_PodSpec, SetDefaults_Container,
//! probes, volumes) and the status a new Pod starts with.

use crate::json::{default, each_object_mut, is_unset, object_mut};
use crate::quantity;
use serde_json::{json, Map, Value};

/// A Pod object: spec defaults, plus what admission and the create strategy fill in.
pub(crate) fn pod(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    pod_spec(spec);
    // Only Pods (not templates) get requests copied from limits, like SetDefaults_Pod.
    for key in ["containers", "initContainers"] {
        each_object_mut(spec, key, requests_from_limits);
    }
    // Admission plugins: ServiceAccount (Priority sets spec.priority, for it must know
    // whether the client set one).
    if is_unset(spec, "serviceAccountName") {
        spec.insert("serviceAccountName".into(), json!("default"));
    }
    mirror_service_account(spec);
    let qos = qos_class(spec);
    if let Some(status) = object_mut(obj, "status") {
        default(status, "phase", json!("Pending"));
        default(status, "qosClass", json!(qos));
    }
}

/// The pod template in a workload's `spec` (Deployment, ReplicaSet, DaemonSet, StatefulSet,
/// Job): its spec as a Pod's.
pub(crate) fn pod_template(spec: &mut Map<String, Value>) {
    if let Some(pod) = spec
        .get_mut("template")
        .and_then(Value::as_object_mut)
        .and_then(|t| object_mut(t, "spec"))
    {
        pod_spec(pod);
    }
}

/// The spec of a Pod or of a pod template.
pub(crate) fn pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "securityContext", json!({}));
    default(spec, "enableServiceLinks", json!(true));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    // SetDefaults_EphemeralContainer is SetDefaults_Container on the common part.
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        each_object_mut(spec, key, |c| container(c, host_network));
    }
    each_object_mut(spec, "volumes", volume);
    mirror_service_account(spec);
}

/// v1 keeps the deprecated `serviceAccount` equal to `serviceAccountName`.
fn mirror_service_account(spec: &mut Map<String, Value>) {
    if let Some(name) = spec.get("serviceAccountName").cloned() {
        if !is_unset(spec, "serviceAccountName") && is_unset(spec, "serviceAccount") {
            spec.insert("serviceAccount".into(), name);
        }
    }
}

fn container(c: &mut Map<String, Value>, host_network: bool) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    if is_unset(c, "imagePullPolicy") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    default(c, "resources", json!({}));
    each_object_mut(c, "ports", |p| {
        if is_unset(p, "protocol") {
            p.insert("protocol".into(), json!("TCP"));
        }
        // SetDefaults_PodSpec: with host networking the host port is the container port.
        if host_network && is_unset(p, "hostPort") {
            if let Some(port) = p.get("containerPort").cloned() {
                p.insert("hostPort".into(), port);
            }
        }
    });
    each_object_mut(c, "env", |e| {
        if let Some(field_ref) = e
            .get_mut("valueFrom")
            .and_then(Value::as_object_mut)
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            default(field_ref, "apiVersion", json!("v1"));
        }
    });
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(key).and_then(Value::as_object_mut) {
            probe(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for key in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(key).and_then(Value::as_object_mut) {
                http_get(h);
            }
        }
    }
}

/// The tag of an image reference; "latest" when neither tag nor digest is given.
fn image_tag(image: &str) -> &str {
    if image.contains('@') {
        let name = image.split('@').next().unwrap_or("");
        let last = name.rsplit('/').next().unwrap_or("");
        return last.split_once(':').map(|(_, t)| t).unwrap_or("");
    }
    let last = image.rsplit('/').next().unwrap_or("");
    last.split_once(':').map(|(_, t)| t).unwrap_or("latest")
}

fn probe(p: &mut Map<String, Value>) {
    for (key, value) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if is_unset(p, key) {
            p.insert(key.into(), json!(value));
        }
    }
    http_get(p);
}

fn http_get(handler: &mut Map<String, Value>) {
    if let Some(h) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        if is_unset(h, "path") {
            h.insert("path".into(), json!("/"));
        }
        if is_unset(h, "scheme") {
            h.insert("scheme".into(), json!("HTTP"));
        }
    }
}

fn volume(v: &mut Map<String, Value>) {
    // SetDefaults_Volume: a volume with no source is an emptyDir.
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for key in ["configMap", "secret", "projected", "downwardAPI"] {
        if let Some(src) = v.get_mut(key).and_then(Value::as_object_mut) {
            default(src, "defaultMode", json!(420));
        }
    }
}

fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if limits.is_empty() {
        return;
    }
    if let Some(requests) = object_mut(resources, "requests") {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// Upstream's GetPodQOS, over cpu and memory.
fn qos_class(spec: &Map<String, Value>) -> &'static str {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten();
    let (mut any, mut guaranteed) = (false, true);
    for c in containers {
        let res = |kind: &str, name: &str| {
            c.pointer(&format!("/resources/{kind}/{name}"))
                .and_then(quantity::parse_value)
                .filter(|q| *q != 0.0)
        };
        for name in ["cpu", "memory"] {
            let (req, lim) = (res("requests", name), res("limits", name));
            any |= req.is_some() || lim.is_some();
            guaranteed &= lim.is_some() && (req.is_none() || req == lim);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}
