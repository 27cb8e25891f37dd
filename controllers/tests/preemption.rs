//! Pod priority and preemption against a real keelson-apiserver (PriorityClasses, the Priority
//! admission plugin) and keelson-scheduler, driven by kubectl as a user would. No agent: one
//! registered Node with 1 cpu; a bound Pod stays bound without running, and a deleted one
//! stays terminating (its node never confirms), which is all the scheduler looks at.

use std::time::Duration;

use keelson_testing::{eventually, Apiserver, Component, Daemon};

/// A Ready Node with 1 cpu.
fn node(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status:
  allocatable: {{cpu: '1', memory: 4Gi, pods: '110'}}
  conditions: [{{type: Ready, status: 'True', reason: KubeletReady, message: ready}}]
"
    )
}

const CLASSES: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: lowest}
value: 5
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-polite}
value: 1000
preemptionPolicy: Never
";

/// A Pod of `class` asking for most of a node's cpu: two never fit together.
fn pod(name: &str, class: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: {name}}}}}
spec:
  priorityClassName: {class}
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: 800m}}}}}}]
"
    )
}

/// `pod`, bound to `node` by the scheduler through its nodeSelector.
fn pod_on(name: &str, class: &str, node: &str) -> String {
    pod(name, class) + &format!("  nodeSelector: {{kubernetes.io/hostname: {node}}}\n")
}

struct Cluster {
    api: Apiserver,
    scheduler: Daemon,
    /// For the default ServiceAccount that Pod admission wants.
    _cm: Daemon,
}

impl Cluster {
    /// The API server, scheduler and controller manager, the `nodes` and the PriorityClasses.
    fn start(nodes: &[&str]) -> Cluster {
        let api = Apiserver::start();
        let scheduler = Daemon::start(&api, "keelson-scheduler", Component::Scheduler, &[]);
        let _cm = Daemon::controller_manager(&api, &[]);
        for n in nodes {
            api.apply(&node(n));
        }
        api.apply(CLASSES);
        Cluster {
            api,
            scheduler,
            _cm,
        }
    }

    /// `kubectl get <what> -o jsonpath=<path>` (empty when it fails, e.g. not found).
    fn get(&self, what: &[&str], path: &str) -> String {
        self.api.kubectl_cmd().jsonpath(what, path)
    }

    fn wait(&self, what: &str, mut check: impl FnMut() -> bool) {
        eventually(what, Duration::from_secs(60), || match check() {
            true => Ok(()),
            false => Err(format!("scheduler log:\n{}", self.scheduler.log())),
        });
    }

    fn node_of(&self, pod: &str) -> String {
        self.get(&["pod", pod], "{.spec.nodeName}")
    }
}

#[test]
fn a_high_priority_pod_preempts_a_low_priority_one_and_a_never_policy_pod_waits() {
    let c = Cluster::start(&["node-a"]);

    c.api.apply(&pod("low", "low"));
    c.wait("the low-priority pod bound to node-a", || {
        c.node_of("low") == "node-a"
    });
    assert_eq!(c.get(&["pod", "low"], "{.spec.priority}"), "10");

    // Important, but never preempting: it waits, and says why.
    c.api.apply(&pod("polite", "high-polite"));
    let want = "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never..";
    c.wait("FailedScheduling of the Never pod in describe", || {
        let out = c
            .api
            .kubectl_cmd()
            .run(&["describe", "pod", "polite"])
            .unwrap_or_default();
        out.contains("FailedScheduling") && out.contains(want)
    });
    let scheduled = "{.status.conditions[?(@.type==\"PodScheduled\")].reason}";
    assert_eq!(c.get(&["pod", "polite"], scheduled), "Unschedulable");
    assert_eq!(c.get(&["pod", "low"], "{.metadata.deletionTimestamp}"), "");

    // As important, and allowed to preempt: the low-priority pod makes room for it.
    c.api.apply(&pod("urgent", "high"));
    c.wait("the preemptor bound to node-a", || {
        c.node_of("urgent") == "node-a"
    });
    assert_eq!(
        c.get(&["pod", "urgent"], "{.status.nominatedNodeName}"),
        "node-a"
    );
    assert_ne!(
        c.get(&["pod", "low"], "{.metadata.deletionTimestamp}"),
        "",
        "the victim is not being deleted"
    );
    let target = "{.status.conditions[?(@.type==\"DisruptionTarget\")].reason}";
    assert_eq!(c.get(&["pod", "low"], target), "PreemptionByScheduler");
    let uid = c.get(&["pod", "urgent"], "{.metadata.uid}");
    c.wait("the Preempted event on the victim", || {
        c.get(
            &[
                "events",
                "--field-selector",
                "involvedObject.name=low,reason=Preempted",
            ],
            "{.items[*].message}",
        ) == format!("Preempted by pod {uid} on node node-a")
    });
    // The room the preemption freed was held for the preemptor, not given to the older pod
    // of equal priority.
    assert_eq!(c.node_of("polite"), "");

    let metric = |name: &str| c.scheduler.metric(name).unwrap_or(0.0);
    assert!(metric("scheduler_preemption_attempts_total") >= 2.0);
    assert_eq!(metric("scheduler_preemption_victims_sum"), 1.0);
    assert_eq!(metric("scheduler_preemption_victims_count"), 1.0);
}

#[test]
fn preemption_spares_a_pod_that_a_disruption_budget_protects() {
    let c = Cluster::start(&["node-a", "node-b"]);
    // The least important pod is the cheapest victim, but a budget allows no disruption of it.
    c.api.apply(&pod_on("guarded", "lowest", "node-a"));
    c.api.apply(&pod_on("plain", "low", "node-b"));
    c.api.apply(
        "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guard}
spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}
",
    );
    c.wait("both low-priority pods bound", || {
        c.node_of("guarded") == "node-a" && c.node_of("plain") == "node-b"
    });
    c.wait("the budget's status from the disruption controller", || {
        c.get(&["pdb", "guard"], "{.status.expectedPods}") == "1"
            && c.get(&["pdb", "guard"], "{.status.disruptionsAllowed}") == "0"
    });

    c.api.apply(&pod("urgent", "high"));
    c.wait("the preemptor bound to node-b", || {
        c.node_of("urgent") == "node-b"
    });
    assert_ne!(
        c.get(&["pod", "plain"], "{.metadata.deletionTimestamp}"),
        ""
    );
    assert_eq!(
        c.get(&["pod", "guarded"], "{.metadata.deletionTimestamp}"),
        "",
        "the budget-protected pod was preempted"
    );
}
