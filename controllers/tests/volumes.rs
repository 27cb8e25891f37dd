//! Storage against a real keelson-apiserver with the controller manager (the volume binder and
//! the local-path provisioner) and the scheduler (volume binding), driven by kubectl as a user
//! would. No agent: the test registers a Ready Node and checks what the control plane decides.

use std::process::Command;
use std::time::Duration;

use keelson_testing::{binary, eventually, free_port, Apiserver, ChildGuard, Component};

struct Cluster {
    api: Apiserver,
    _daemons: Vec<ChildGuard>,
}

impl Cluster {
    fn start() -> Cluster {
        let api = Apiserver::start();
        let mut daemons = Vec::new();
        for (name, who) in [
            ("keelson-controller-manager", Component::ControllerManager),
            ("keelson-scheduler", Component::Scheduler),
        ] {
            let mut cmd = Command::new(binary(name));
            cmd.arg("--kubeconfig").arg(api.kubeconfig_of(who)).args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{}", free_port()),
            ]);
            if name == "keelson-controller-manager" {
                // No agent renews the Node's Lease here.
                cmd.arg("--node-monitor-grace-period=1h");
            }
            let log = api.dir.path().join(format!("{name}.log"));
            daemons.push(ChildGuard::spawn_logged(&mut cmd, &log));
        }
        api.apply(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  labels: {kubernetes.io/hostname: node-a}\nstatus:\n  allocatable: {cpu: '2', memory: 4Gi, pods: '110'}\n  conditions: [{type: Ready, status: 'True', reason: KubeletReady, message: ready}]\n",
        );
        Cluster {
            api,
            _daemons: daemons,
        }
    }

    fn get(&self, what: &[&str], path: &str) -> String {
        self.api.kubectl_cmd().jsonpath(what, path)
    }

    fn wait(&self, what: &str, mut check: impl FnMut() -> bool) {
        eventually(what, Duration::from_secs(30), || match check() {
            true => Ok(()),
            false => Err(format!("controller log:\n{}", self.log())),
        });
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.api.dir.path().join("keelson-controller-manager.log"))
            .unwrap_or_default()
    }

    /// The messages of the Events about `kind/name`, one a line.
    fn events(&self, kind: &str, name: &str) -> String {
        let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
        self.get(
            &["events", "--field-selector", &selector],
            "{range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        )
    }
}

const LOCAL_PATH: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}
provisioner: rancher.io/local-path
parameters: {nodePath: /srv/keelson-test}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
";

fn claim(name: &str, class: Option<&str>, size: &str) -> String {
    let class = class
        .map(|c| format!("  storageClassName: \"{c}\"\n"))
        .unwrap_or_default();
    format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\nspec:\n{class}  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: {size}}}}}\n")
}

fn pod(name: &str, claim: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - {{name: c, image: busybox}}\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim}}}\n")
}

/// A claim naming no class gets the default local-path; it waits for its first pod, the
/// scheduler picks the node, the provisioner makes a volume there, the claim binds and the pod
/// is bound to that node. The claim outlives nothing it protects: deleted while its pod runs it
/// stays (pvc-protection), and once it goes, reclaim Delete removes its volume.
#[test]
fn a_claim_gets_a_local_volume_on_its_pods_node() {
    let c = Cluster::start();
    c.api.apply(LOCAL_PATH);
    c.api.apply(&claim("data", None, "1Gi"));
    c.wait("the default class on the claim", || {
        c.get(&["pvc", "data"], "{.spec.storageClassName}") == "local-path"
    });
    c.wait("the WaitForFirstConsumer event", || {
        c.events("PersistentVolumeClaim", "data").contains(
            "WaitForFirstConsumer: waiting for first consumer to be created before binding",
        )
    });
    assert_eq!(c.get(&["pvc", "data"], "{.status.phase}"), "Pending");
    c.api.apply(&pod("db", "data"));
    c.wait("the claim bound", || {
        c.get(&["pvc", "data"], "{.status.phase}") == "Bound"
    });
    let uid = c.get(&["pvc", "data"], "{.metadata.uid}");
    let pv = format!("pvc-{uid}");
    assert_eq!(c.get(&["pvc", "data"], "{.spec.volumeName}"), pv);
    assert_eq!(
        c.get(
            &["pvc", "data"],
            "{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}"
        ),
        "node-a"
    );
    assert_eq!(
        c.get(&["pv", &pv], "{.spec.hostPath.path} {.spec.capacity.storage} {.spec.persistentVolumeReclaimPolicy} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}"),
        format!("/srv/keelson-test/{pv} 1Gi Delete node-a")
    );
    c.wait("the volume Bound", || {
        c.get(&["pv", &pv], "{.status.phase}") == "Bound"
    });
    // What kubectl get prints (1.32's columns).
    let row = |args: &[&str]| -> Vec<String> {
        let out = c.api.kubectl_cmd().ok(args);
        out.split_whitespace().map(String::from).collect()
    };
    let pvc = row(&["get", "pvc", "data", "--no-headers"]);
    assert_eq!(
        pvc[..7],
        ["data", "Bound", &pv, "1Gi", "RWO", "local-path", "<unset>"]
    );
    let volume = row(&["get", "pv", &pv, "--no-headers"]);
    let want = [
        &pv,
        "1Gi",
        "RWO",
        "Delete",
        "Bound",
        "default/data",
        "local-path",
        "<unset>",
    ];
    assert_eq!(volume[..8], want);
    let sc = row(&["get", "storageclass", "--no-headers"]);
    assert_eq!(
        sc[..6],
        [
            "local-path",
            "(default)",
            "rancher.io/local-path",
            "Delete",
            "WaitForFirstConsumer",
            "false"
        ]
    );
    c.wait("the pod bound to the volume's node", || {
        c.get(&["pod", "db"], "{.spec.nodeName}") == "node-a"
    });
    assert_eq!(
        c.get(&["pvc", "data"], "{.metadata.finalizers[0]}"),
        "kubernetes.io/pvc-protection"
    );
    // Deleted while its pod uses it: kept until the pod is gone.
    c.api
        .kubectl_cmd()
        .ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.get(&["pvc", "data"], "{.status.phase}"), "Bound");
    c.api
        .kubectl_cmd()
        .ok(&["delete", "pod", "db", "--grace-period=0", "--force"]);
    c.wait(
        "the claim gone, and its volume with it (reclaim Delete)",
        || {
            !c.api.kubectl(&["get", "pvc", "data"]).status.success()
                && !c.api.kubectl(&["get", "pv", &pv]).status.success()
        },
    );
}

/// Static volumes: the smallest that fits binds; Retain keeps it Released after the claim;
/// a Bound volume being deleted waits for its claim (pv-protection).
#[test]
fn a_claim_binds_the_smallest_fitting_volume_and_retain_keeps_it() {
    let c = Cluster::start();
    for (name, size) in [("big", "10Gi"), ("small", "2Gi"), ("tiny", "100Mi")] {
        c.api.apply(&format!("apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  capacity: {{storage: {size}}}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n  storageClassName: manual\n  hostPath: {{path: /srv/{name}}}\n"));
    }
    c.wait("the volumes Available", || {
        c.get(&["pv", "tiny"], "{.status.phase}") == "Available"
    });
    c.api.apply(&claim("logs", Some("manual"), "1Gi"));
    c.wait("the claim bound", || {
        c.get(&["pvc", "logs"], "{.status.phase}") == "Bound"
    });
    assert_eq!(c.get(&["pvc", "logs"], "{.spec.volumeName}"), "small");
    assert_eq!(c.get(&["pvc", "logs"], "{.status.capacity.storage}"), "2Gi");
    assert_eq!(
        c.get(
            &["pvc", "logs"],
            "{.metadata.annotations.pv\\.kubernetes\\.io/bind-completed}"
        ),
        "yes"
    );
    c.wait("the volume Bound to it", || {
        c.get(&["pv", "small"], "{.status.phase} {.spec.claimRef.name}") == "Bound logs"
    });
    assert_eq!(c.get(&["pv", "big"], "{.status.phase}"), "Available");
    c.api.kubectl_cmd().ok(&["delete", "pvc", "logs"]);
    c.wait("the volume Released and kept", || {
        c.get(&["pv", "small"], "{.status.phase}") == "Released"
    });
    // pv-protection: a Bound volume deleted stays until its claim lets go of it.
    c.api.apply(&claim("cache", Some("manual"), "5Gi"));
    c.wait("the big volume bound", || {
        c.get(&["pvc", "cache"], "{.spec.volumeName} {.status.phase}") == "big Bound"
    });
    c.api
        .kubectl_cmd()
        .ok(&["delete", "pv", "big", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        c.get(&["pv", "big"], "{.metadata.finalizers[0]}"),
        "kubernetes.io/pv-protection"
    );
    c.api.kubectl_cmd().ok(&["delete", "pvc", "cache"]);
    c.wait("the deleted volume gone once released", || {
        !c.api.kubectl(&["get", "pv", "big"]).status.success()
    });
}

/// A pod whose claim names a class that does not exist stays Pending, and both say why.
#[test]
fn a_pod_whose_claim_cannot_bind_stays_pending_with_events() {
    let c = Cluster::start();
    c.api.apply(&claim("lost", Some("nope"), "1Gi"));
    c.api.apply(&pod("waits", "lost"));
    c.wait("the scheduler's FailedScheduling", || {
        c.events("Pod", "waits").contains("FailedScheduling: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    });
    c.wait("the binder's ProvisioningFailed", || {
        c.events("PersistentVolumeClaim", "lost")
            .contains("ProvisioningFailed: storageclass.storage.k8s.io \"nope\" not found")
    });
    assert_eq!(c.get(&["pod", "waits"], "{.spec.nodeName}"), "");
    assert_eq!(c.get(&["pvc", "lost"], "{.status.phase}"), "Pending");
}
