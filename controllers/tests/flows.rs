//! The controllers and the scheduler against a real keelson-apiserver, driven by kubectl; the
//! test plays the node agents by registering Nodes and reporting Pods Running and Ready.

use std::process::{Command, Output};
use std::time::Duration;

use keelson_testing::{binary, free_port, metric_sum, run, Apiserver, ChildGuard, Component};

/// A keelson-apiserver with the controller manager and the scheduler against it.
struct Cluster {
    api: Apiserver,
    _daemons: Vec<ChildGuard>,
    /// --metrics-bind-address of the controller manager, then of the scheduler.
    metrics: Vec<String>,
}

impl Cluster {
    fn start() -> Cluster {
        let api = Apiserver::start();
        let mut daemons = Vec::new();
        let mut metrics = Vec::new();
        // Each as itself, with what the bootstrap RBAC policy grants it.
        for (name, who) in [
            ("keelson-controller-manager", Component::ControllerManager),
            ("keelson-scheduler", Component::Scheduler),
        ] {
            let addr = format!("127.0.0.1:{}", free_port());
            let mut cmd = Command::new(binary(name));
            cmd.arg("--kubeconfig")
                .arg(api.kubeconfig_of(who))
                .args(["--metrics-bind-address", &addr]);
            if name == "keelson-controller-manager" {
                // The test's Nodes renew no Lease: node lifecycle would mark them Unknown and
                // evict their pods 40 s in, which is not what these flows test.
                cmd.arg("--node-monitor-grace-period=1h");
            }
            let log = api.dir.path().join(format!("{name}.log"));
            daemons.push(ChildGuard::spawn_logged(&mut cmd, &log));
            metrics.push(addr);
        }
        Cluster {
            api,
            _daemons: daemons,
            metrics,
        }
    }

    /// GET of `path` on the controller manager (0) or the scheduler (1); None until it answers.
    fn scrape(&self, which: usize, path: &str) -> Option<String> {
        let url = format!("http://{}{path}", self.metrics[which]);
        run(Command::new("curl").args(["-sf", "-m", "2", &url])).ok()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.api.kubectl(args)
    }

    /// kubectl that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.must(self.api.kubectl_cmd().run(args))
    }

    /// The output, or a panic with the error and the controller manager's log.
    fn must(&self, out: Result<String, String>) -> String {
        out.unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.log()))
    }

    /// `kubectl get <what> -o jsonpath=<path>`: stdout, or why it failed.
    fn get(&self, what: &[&str], path: &str) -> Result<String, String> {
        let path = format!("jsonpath={path}");
        let args: Vec<&str> = ["get"]
            .into_iter()
            .chain(what.iter().copied())
            .chain(["-o", &path])
            .collect();
        self.api.kubectl_cmd().run(&args)
    }

    /// `get` that must succeed.
    fn jsonpath(&self, what: &[&str], path: &str) -> String {
        self.must(self.get(what, path))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.api.dir.path().join("keelson-controller-manager.log"))
            .unwrap_or_default()
    }

    fn eventually(&self, what: &str, mut f: impl FnMut() -> bool) {
        // Generous: every step is a durable write, and fsync is slow while other tests build.
        keelson_testing::eventually(what, Duration::from_secs(90), || {
            f().then_some(())
                .ok_or_else(|| format!("controller log:\n{}", self.log()))
        })
    }

    fn pods(&self, selector: &str) -> Vec<String> {
        self.ok(&["get", "pods", "-l", selector, "-o", "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{end}{range .items[*]}{.metadata.name}{\"\\n\"}{end}"])
            .lines()
            .map(String::from)
            .collect()
    }

    /// What a node agent reports once a Pod's containers run and pass readiness.
    fn mark_ready(&self, selector: &str) {
        for (i, p) in self.pods(selector).iter().enumerate() {
            let ip = format!("10.244.0.{}", 10 + i);
            self.must(self.api.kubectl_cmd().mark_pod_ready(p, Some(&ip)));
        }
    }
}

fn example(name: &str) -> String {
    keelson_testing::examples_dir()
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn deployment_to_ready_pods_endpoints_rollout_and_cascade() {
    let c = Cluster::start();
    c.ok(&[
        "apply",
        "-f",
        &example("deployment.yaml"),
        "-f",
        &example("service.yaml"),
    ]);
    c.eventually("3 pods from the deployment", || {
        c.pods("app=web").len() == 3
    });
    let owner = c.jsonpath(
        &["pods", "-l", "app=web"],
        "{.items[0].metadata.ownerReferences[0].kind}",
    );
    assert_eq!(owner, "ReplicaSet");
    c.mark_ready("app=web");
    c.ok(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    let ready = c.jsonpath(
        &["deploy", "web"],
        "{.status.readyReplicas}/{.status.availableReplicas}",
    );
    assert_eq!(ready, "3/3");

    // The Service's EndpointSlice lists the three ready Pods on the resolved named port.
    c.eventually("3 ready endpoints", || {
        let out = c.get(
            &["endpointslices", "-l", "kubernetes.io/service-name=web"],
            "{.items[0].ports[0].port} {.items[0].endpoints[*].conditions.ready}",
        );
        out.as_deref() == Ok("8080 true true true")
    });

    // Scaling up and down.
    c.ok(&["scale", "deployment", "web", "--replicas=5"]);
    c.eventually("5 pods", || c.pods("app=web").len() == 5);
    c.ok(&["scale", "deployment", "web", "--replicas=2"]);
    c.eventually("2 pods", || c.pods("app=web").len() == 2);
    c.mark_ready("app=web");

    // A new image rolls to a new ReplicaSet as its Pods become ready; the old one goes to 0.
    c.ok(&[
        "set",
        "image",
        "deployment/web",
        "web=127.0.0.1:5000/keelson/podname-http:2",
    ]);
    c.eventually("two ReplicaSets", || {
        c.ok(&["get", "rs", "-o", "name"]).lines().count() == 2
    });
    c.eventually("the rollout to finish", || {
        c.mark_ready("app=web");
        let images = c.jsonpath(
            &["pods", "-l", "app=web"],
            "{.items[*].spec.containers[0].image}",
        );
        let st = c.jsonpath(
            &["deploy", "web"],
            "{.status.updatedReplicas}/{.status.replicas}/{.status.availableReplicas}",
        );
        st == "2/2/2" && images.split(' ').all(|i| i.ends_with(":2"))
    });
    c.ok(&["rollout", "status", "deployment/web", "--timeout=90s"]);

    // Deleting the Deployment removes its ReplicaSets and Pods (garbage collector).
    c.ok(&["delete", "deployment", "web"]);
    c.eventually("ReplicaSets and Pods to be collected", || {
        c.ok(&["get", "rs", "-o", "name"]).is_empty()
            && c.ok(&["get", "pods", "-o", "name"]).is_empty()
    });
    // Deleting the Service removes its EndpointSlice.
    c.ok(&["delete", "service", "web"]);
    c.eventually("the EndpointSlice to be collected", || {
        c.ok(&["get", "endpointslices", "-o", "name"]).is_empty()
    });
}

/// A Pod bound to node-a (so its deletion waits for that node's agent), a Service over it, and
/// a second one with publishNotReadyAddresses (peer discovery).
const API_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: api-0, labels: {app: api}}
spec:
  nodeName: node-a
  terminationGracePeriodSeconds: 300
  containers: [{name: api, image: busybox, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec: {selector: {app: api}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: api-peers}
spec: {selector: {app: api}, publishNotReadyAddresses: true, ports: [{port: 80, targetPort: 8080}]}
";

/// "ready serving terminating" of the endpoints in the slices of `service`.
fn endpoint_conditions(c: &Cluster, service: &str) -> Result<String, String> {
    c.get(
        &["endpointslices", "-l", &format!("kubernetes.io/service-name={service}")],
        "{range .items[*].endpoints[*]}{.conditions.ready} {.conditions.serving} {.conditions.terminating}{end}",
    )
}

#[test]
fn graceful_pod_deletion_marks_its_endpoint_terminating_until_the_pod_is_gone() {
    let c = Cluster::start();
    c.api.apply(&node("node-a"));
    c.api.apply(API_POD);
    c.mark_ready("app=api");
    for svc in ["api", "api-peers"] {
        c.eventually(&format!("a ready endpoint of {svc}"), || {
            endpoint_conditions(&c, svc).as_deref() == Ok("true true false")
        });
    }

    // Deleted with its 300 s grace period: the Pod stays until its node confirms, but its
    // endpoint leaves new traffic at once (ready=false) while it still serves and drains.
    c.ok(&["delete", "pod", "api-0", "--wait=false"]);
    c.eventually("the endpoint of api to turn terminating", || {
        endpoint_conditions(&c, "api").as_deref() == Ok("false true true")
    });
    let deleting = c.jsonpath(&["pod", "api-0"], "{.metadata.deletionTimestamp}");
    assert!(!deleting.is_empty(), "the pod is already gone");
    // publishNotReadyAddresses: every address stays published as ready, terminating or not.
    c.eventually(
        "the endpoint of api-peers to stay ready while terminating",
        || endpoint_conditions(&c, "api-peers").as_deref() == Ok("true true true"),
    );

    // Once the Pod is gone, so is its endpoint.
    c.ok(&["delete", "pod", "api-0", "--grace-period=0", "--force"]);
    for svc in ["api", "api-peers"] {
        c.eventually(&format!("no endpoint left in {svc}"), || {
            endpoint_conditions(&c, svc).as_deref() == Ok("")
        });
    }
}

#[test]
fn namespace_deletion_empties_then_removes_it() {
    let c = Cluster::start();
    c.ok(&["create", "namespace", "doomed"]);
    c.ok(&[
        "create",
        "configmap",
        "a",
        "-n",
        "doomed",
        "--from-literal=k=v",
    ]);
    c.ok(&[
        "create",
        "deployment",
        "d",
        "-n",
        "doomed",
        "--image=busybox",
    ]);
    // Kinds beyond the workloads: the controller finds them by discovery.
    c.ok(&[
        "create",
        "role",
        "r",
        "-n",
        "doomed",
        "--verb=get",
        "--resource=pods",
    ]);
    c.api.apply(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: doomed}\nspec: {podSelector: {}}\n",
    );
    c.eventually("the deployment's pod", || {
        c.ok(&["get", "pods", "-n", "doomed", "-o", "name"])
            .lines()
            .count()
            == 1
    });
    let out = c.ok(&["delete", "namespace", "doomed", "--timeout=90s"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(!c.kubectl(&["get", "namespace", "doomed"]).status.success());
    // A namespace of the same name starts empty: nothing of the old one was left in the store.
    c.ok(&["create", "namespace", "doomed"]);
    let left = c.ok(&[
        "get",
        "netpol,role,configmap,deployment",
        "-n",
        "doomed",
        "-o",
        "name",
    ]);
    assert!(
        left.lines().all(|l| l == "configmap/kube-root-ca.crt"),
        "{left}"
    );
}

fn node(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\nstatus:\n  allocatable: {{cpu: '2', memory: 4Gi, pods: '110'}}\n  conditions: [{{type: Ready, status: 'True', reason: KubeletReady, message: ready}}]\n"
    )
}

#[test]
fn scheduler_spreads_replicas_and_explains_unschedulable_pods() {
    let c = Cluster::start();
    for n in ["node-a", "node-b", "node-c"] {
        c.api.apply(&node(n));
    }
    // The scheduler has seen all three nodes once a pod pinned to the last one is bound (one
    // watch delivers nodes in order); only then is an even spread the right answer.
    c.ok(&[
        "run",
        "probe",
        "--image=busybox",
        "--overrides={\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"node-c\"}}}",
    ]);
    c.eventually("the probe pod bound to node-c", || {
        c.jsonpath(&["pod", "probe"], "{.spec.nodeName}") == "node-c"
    });
    c.ok(&[
        "create",
        "deployment",
        "spread",
        "--image=busybox",
        "--replicas=6",
    ]);
    c.eventually("6 pods bound to nodes", || {
        let nodes = c.jsonpath(&["pods", "-l", "app=spread"], "{.items[*].spec.nodeName}");
        nodes.split_whitespace().count() == 6
    });
    let nodes = c.jsonpath(&["pods", "-l", "app=spread"], "{.items[*].spec.nodeName}");
    // Both daemons say so on /metrics (and are healthy).
    for which in [0, 1] {
        assert_eq!(c.scrape(which, "/healthz").as_deref(), Some("ok"));
    }
    let bound = metric_sum(
        &c.scrape(1, "/metrics").unwrap_or_default(),
        "scheduler_pods_bound_total",
    );
    assert!(bound >= 7.0, "scheduler_pods_bound_total {bound}");
    let reconciles = metric_sum(
        &c.scrape(0, "/metrics").unwrap_or_default(),
        "keelson_controller_reconciles_total",
    );
    assert!(
        reconciles > 0.0,
        "keelson_controller_reconciles_total {reconciles}"
    );
    // Nothing was deleted and made again on the way (the collector once took brand-new
    // ReplicaSets for orphans): one ReplicaSet, and no Pod is terminating.
    assert_eq!(c.ok(&["get", "rs", "-o", "name"]).lines().count(), 1);
    let deleting = c.jsonpath(&["pods"], "{.items[*].metadata.deletionTimestamp}");
    assert_eq!(deleting, "", "pods being deleted");
    for n in ["node-a", "node-b", "node-c"] {
        assert_eq!(
            nodes.split_whitespace().filter(|x| *x == n).count(),
            2,
            "not spread evenly: {nodes}"
        );
    }
    let scheduled = c.jsonpath(
        &["pods", "-l", "app=spread"],
        "{.items[0].status.conditions[?(@.type==\"PodScheduled\")].status}",
    );
    assert_eq!(scheduled, "True");
    c.ok(&[
        "run",
        "nowhere",
        "--image=busybox",
        "--overrides={\"spec\":{\"nodeSelector\":{\"disk\":\"nvme\"}}}",
    ]);
    c.eventually("the unschedulable condition", || {
        let msg = c.jsonpath(
            &["pod", "nowhere"],
            "{.status.conditions[?(@.type==\"PodScheduled\")].message}",
        );
        msg == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    });
    assert_eq!(c.jsonpath(&["pod", "nowhere"], "{.spec.nodeName}"), "");
}

/// The Events a user reads with `kubectl describe` and `kubectl get events`.
#[test]
fn describe_shows_scaling_scheduling_and_counted_failed_scheduling_events() {
    let c = Cluster::start();
    c.api.apply(&node("node-a"));
    c.api.apply(&node("node-b"));
    c.ok(&["taint", "node", "node-b", "dedicated=db:NoSchedule"]);
    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=2",
    ]);
    c.eventually("ScalingReplicaSet and SuccessfulCreate in describe", || {
        let d = c.ok(&["describe", "deployment", "web"]);
        let rs = c.ok(&["describe", "rs", "-l", "app=web"]);
        d.contains("ScalingReplicaSet")
            && d.contains("Scaled up replica set web-")
            && d.contains(" from 0 to 2")
            && d.contains("deployment-controller")
            && rs.contains("SuccessfulCreate")
            && rs.contains("Created pod: web-")
    });
    c.eventually("Scheduled in the pods' describe", || {
        let pods = c.ok(&["describe", "pods", "-l", "app=web"]);
        pods.matches("Successfully assigned default/web-").count() == 2
            && pods.contains("default-scheduler")
    });
    // Too much cpu for node-a, and node-b's taint is not tolerated.
    c.ok(&[
        "run",
        "big",
        "--image=busybox",
        "--overrides={\"spec\":{\"containers\":[{\"name\":\"big\",\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"3\"}}}]}}",
    ]);
    let want = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: db}. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling..";
    c.eventually("FailedScheduling in describe pod", || {
        let out = c.ok(&["describe", "pod", "big"]);
        out.contains("FailedScheduling") && out.contains(want)
    });
    let reason = "{.status.conditions[?(@.type==\"PodScheduled\")].reason}";
    assert_eq!(c.jsonpath(&["pod", "big"], reason), "Unschedulable");
    // The scheduler tries again (at least every 10 s per pod): one Event, counted.
    let failed = [
        "events",
        "--field-selector",
        "involvedObject.name=big,reason=FailedScheduling",
    ];
    keelson_testing::eventually(
        "FailedScheduling counted into one Event",
        Duration::from_secs(60),
        || {
            let counts = c.jsonpath(&failed, "{.items[*].count}");
            let counts: Vec<&str> = counts.split_whitespace().collect();
            match counts.as_slice() {
                [n] if n.parse::<u32>().is_ok_and(|n| n > 1) => Ok(()),
                other => Err(format!("counts {other:?}")),
            }
        },
    );
    let out = c.ok(&["describe", "pod", "big"]);
    assert!(
        out.contains("(x2 over") || out.contains("(x3 over"),
        "{out}"
    );
}

/// The disruption controller keeps a budget's status from its pods, and the eviction
/// subresource honours it: with minAvailable 2 of a 2-replica Deployment nothing may go; one
/// more replica allows one eviction, recorded until the budget is computed again.
#[test]
fn disruption_budget_follows_its_pods_and_limits_evictions() {
    let c = Cluster::start();
    c.ok(&[
        "create",
        "deployment",
        "db",
        "--image=busybox",
        "--replicas=2",
    ]);
    c.eventually("2 pods", || c.pods("app=db").len() == 2);
    c.mark_ready("app=db");
    c.ok(&[
        "create",
        "pdb",
        "db",
        "--selector=app=db",
        "--min-available=2",
    ]);
    let status = || {
        c.jsonpath(&["pdb", "db"], "{.status.currentHealthy}/{.status.desiredHealthy}/{.status.expectedPods}/{.status.disruptionsAllowed}")
    };
    c.eventually("2 healthy of 2 needed, none allowed", || {
        status() == "2/2/2/0"
    });
    let reason = c.jsonpath(&["pdb", "db"], "{.status.conditions[0].reason}");
    assert_eq!(reason, "InsufficientPods");
    let victim = c.pods("app=db")[0].clone();
    let evict = format!(
        r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{victim}","namespace":"default"}}}}"#
    );
    let eviction = |c: &Cluster| {
        c.api.kubectl_stdin(
            &[
                "create",
                "--raw",
                &format!("/api/v1/namespaces/default/pods/{victim}/eviction"),
                "-f",
                "-",
            ],
            &evict,
        )
    };
    let refused = eviction(&c);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("disruption budget"),
        "{err}"
    );
    c.ok(&["scale", "deployment", "db", "--replicas=3"]);
    c.eventually("a third pod", || c.pods("app=db").len() == 3);
    c.mark_ready("app=db");
    c.eventually("one disruption allowed", || status() == "3/2/3/1");
    let granted = eviction(&c);
    assert!(
        granted.status.success(),
        "{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    let disrupted = c.jsonpath(&["pdb", "db"], "{.status.disruptedPods}");
    assert!(
        disrupted.is_empty() || disrupted.contains(&victim),
        "{disrupted}"
    );
}
