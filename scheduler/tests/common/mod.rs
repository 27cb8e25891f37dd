//! A control plane for the scheduler's tests: a real keelson-apiserver, keelson-scheduler and
//! the controller manager (Deployments, the default ServiceAccount), with Nodes registered by
//! kubectl as an agent would report them. No agent: a bound Pod stays bound without running,
//! which is all the scheduler looks at.

#![allow(dead_code)]

use keelson_testing::{eventually, Apiserver, Component, Daemon};
use std::collections::BTreeMap;
use std::time::Duration;

/// A Ready Node's manifest: 4 cpu, 8Gi, 110 pods (plus `extra_allocatable`, e.g.
/// "example.com/gpu: '1'"), its hostname label, `labels` and `spec` (YAML flow, e.g.
/// "{unschedulable: true}").
pub fn node(name: &str, labels: &[(&str, &str)], spec: &str, extra_allocatable: &str) -> String {
    let mut l = format!("kubernetes.io/hostname: {name}");
    for (k, v) in labels {
        l.push_str(&format!(", {k}: '{v}'"));
    }
    let extra = if extra_allocatable.is_empty() {
        String::new()
    } else {
        format!(", {extra_allocatable}")
    };
    format!(
        "apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{{l}}}}}
spec: {spec}
status:
  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'{extra}}}
  capacity: {{cpu: '4', memory: 8Gi, pods: '110'{extra}}}
  conditions: [{{type: Ready, status: 'True', reason: KubeletReady, message: ready}}]
---
"
    )
}

/// `count` nodes `n0..`, node i in zone `z{i % zones}`.
pub fn zoned_nodes(count: usize, zones: usize) -> String {
    (0..count)
        .map(|i| {
            let zone = format!("z{}", i % zones);
            node(
                &format!("n{i}"),
                &[("topology.kubernetes.io/zone", &zone)],
                "{}",
                "",
            )
        })
        .collect()
}

pub struct Cluster {
    pub api: Apiserver,
    pub scheduler: Daemon,
    _cm: Daemon,
}

impl Cluster {
    /// The control plane with `nodes` (manifests) registered and the scheduler started with
    /// `flags`.
    pub fn start(nodes: &str, flags: &[&str]) -> Cluster {
        let api = Apiserver::start();
        let _cm = Daemon::controller_manager(&api, &[]);
        if !nodes.is_empty() {
            api.apply(nodes);
        }
        let scheduler = Daemon::start(&api, "keelson-scheduler", Component::Scheduler, flags);
        // Pod admission wants the namespace's default ServiceAccount.
        eventually(
            "the default ServiceAccount",
            Duration::from_secs(30),
            || {
                api.kubectl(&["get", "serviceaccount", "default"])
                    .status
                    .success()
                    .then_some(())
                    .ok_or_else(|| "not yet".to_string())
            },
        );
        Cluster {
            api,
            scheduler,
            _cm,
        }
    }

    /// `kubectl get <what> -o jsonpath=<path>` (empty when it fails, e.g. not found).
    pub fn get(&self, what: &[&str], path: &str) -> String {
        self.api.kubectl_cmd().jsonpath(what, path)
    }

    pub fn wait(&self, what: &str, mut check: impl FnMut() -> bool) {
        eventually(what, Duration::from_secs(60), || match check() {
            true => Ok(()),
            false => Err(format!("scheduler log:\n{}", self.scheduler.log())),
        });
    }

    pub fn node_of(&self, pod: &str) -> String {
        self.get(&["pod", pod], "{.spec.nodeName}")
    }

    /// Waits until `pod` is bound; its node.
    pub fn bound(&self, pod: &str) -> String {
        self.wait(&format!("pod {pod} bound"), || {
            !self.node_of(pod).is_empty()
        });
        self.node_of(pod)
    }

    /// The message of the Pod's PodScheduled=False condition, once there is one.
    pub fn unschedulable(&self, pod: &str) -> String {
        let path = "{.status.conditions[?(@.type==\"PodScheduled\")].message}";
        self.wait(&format!("pod {pod} reported unschedulable"), || {
            self.get(&["pod", pod], path).starts_with("0/")
        });
        self.get(&["pod", pod], path)
    }

    /// Node per Pod name of the Pods selected by `selector`, once `count` of them are bound.
    pub fn placed(&self, selector: &str, count: usize) -> BTreeMap<String, String> {
        let read = || -> BTreeMap<String, String> {
            let out = self.get(
                &["pods", "-l", selector],
                "{range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
            );
            out.lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(_, n)| !n.is_empty())
                .map(|(p, n)| (p.to_string(), n.to_string()))
                .collect()
        };
        self.wait(&format!("{count} pods of {selector} bound"), || {
            read().len() >= count
        });
        read()
    }

    /// How many of `placed`'s Pods each node (or each zone, through `zone_of`) holds.
    pub fn count_by(
        placed: &BTreeMap<String, String>,
        key: impl Fn(&str) -> String,
    ) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for node in placed.values() {
            *out.entry(key(node)).or_default() += 1;
        }
        out
    }
}

/// A Deployment `name` of `replicas` Pods labelled app=`name`, with `spec_extra` (YAML lines
/// indented for the pod spec, e.g. an affinity) added to its template.
pub fn deployment(name: &str, replicas: usize, spec_extra: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: 10m, memory: 10Mi}}}}}}]
{spec_extra}"
    )
}

/// A bare Pod `name` with `labels` (flow map) and `spec_extra` lines (indented 2).
pub fn pod(name: &str, labels: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: 10m, memory: 10Mi}}}}}}]
{spec_extra}"
    )
}
