//! Persistent volumes on a real node (keelson-agent, containerd, keelson-apiserver; see
//! common/mod.rs): a pod's claim bound to a hostPath volume is that directory, so what one pod
//! writes the next pod using the claim reads, and a local-path volume deleted with reclaim
//! Delete takes its directory with it; a claim that is not bound, or a volume type the
//! agent does not set up, keeps the pod from starting with a FailedMount event, and no sandbox
//! is made for it.

mod common;

use std::time::Duration;

use common::*;

fn claim_pod(name: &str, node: &str, claim: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'cat /data/log 2>/dev/null; echo by-$HOSTNAME >> /data/log; echo DONE; sleep 3600']\n    volumeMounts: [{{name: data, mountPath: /data}}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim}}}\n"
        ),
    )
}

/// A local-path volume on the node and a claim bound to it, as the binder leaves them.
fn bound_claim(cluster: &Cluster, dir: &std::path::Path) {
    cluster.apply(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv-data\n  annotations: {{pv.kubernetes.io/provisioned-by: rancher.io/local-path}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Delete\n  hostPath: {{path: {}, type: DirectoryOrCreate}}\n  claimRef: {{namespace: default, name: data}}\n  nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{}]}}]}}]}}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n  volumeName: pv-data\n",
        dir.display(),
        cluster.node_name
    ));
    cluster
        .kubectl(&[
            "patch",
            "pvc",
            "data",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Bound"}}"#,
        ])
        .expect("claim status Bound");
}

fn logs_done(cluster: &Cluster, pod: &str) -> String {
    cluster.wait_until(Duration::from_secs(60), &format!("{pod}'s output"), || {
        cluster
            .kubectl(&["logs", pod])
            .ok()
            .filter(|l| l.contains("DONE"))
    })
}

#[test]
fn data_written_through_a_claim_is_there_for_the_next_pod() {
    let cluster = Cluster::start("agvol");
    let dir = cluster.tmp.path().join("storage/pv-data");
    bound_claim(&cluster, &dir);
    cluster.apply(&claim_pod("first", &cluster.node_name, "data"));
    let first = logs_done(&cluster, "first");
    assert_eq!(first.trim(), "DONE", "a new volume starts empty");
    cluster
        .kubectl(&["delete", "pod", "first", "--wait=true"])
        .expect("delete first");
    cluster.apply(&claim_pod("second", &cluster.node_name, "data"));
    let second = logs_done(&cluster, "second");
    assert_eq!(second.trim(), "by-first\nDONE", "what the first pod wrote");
    let on_host = std::fs::read_to_string(dir.join("log")).expect("the volume's file on the node");
    assert_eq!(on_host, "by-first\nby-second\n");
    // Reclaim Delete: the volume object goes only after the node removed its directory.
    let finalizers = cluster
        .kubectl(&[
            "get",
            "pv",
            "pv-data",
            "-o",
            "jsonpath={.metadata.finalizers}",
        ])
        .unwrap_or_default();
    assert!(
        finalizers.contains("keelson.dev/local-path-directory"),
        "{finalizers}"
    );
    cluster
        .kubectl(&["delete", "pod", "second", "--wait=true"])
        .expect("delete second");
    cluster
        .kubectl(&["delete", "pv", "pv-data", "--wait=false"])
        .expect("delete the volume");
    cluster.wait_until(
        Duration::from_secs(30),
        "the volume and its directory gone",
        || {
            let gone = cluster.kubectl(&["get", "pv", "pv-data"]).is_err();
            (gone && !dir.exists()).then_some(())
        },
    );
}

#[test]
fn an_unbound_claim_or_an_unsupported_volume_keeps_the_pod_from_starting() {
    let cluster = Cluster::start("agvun");
    cluster.apply("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: waiting}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n");
    cluster.apply(&claim_pod("stuck", &cluster.node_name, "waiting"));
    cluster.apply(&pod_yaml(
        "nfs",
        &cluster.node_name,
        &format!("  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n    volumeMounts: [{{name: share, mountPath: /share}}]\n  volumes:\n  - name: share\n    nfs: {{server: 192.0.2.1, path: /export}}\n"),
    ));
    let want = [
        ("stuck", "FailedMount: Unable to attach or mount volumes: unmounted volumes=[data]: error processing PVC default/waiting: PVC is not bound"),
        ("nfs", "FailedMount: Unable to attach or mount volumes: unmounted volumes=[share]: volume type nfs is not supported by keelson-agent"),
    ];
    for (pod, event) in want {
        cluster.wait_until(Duration::from_secs(30), &format!("{pod}'s event"), || {
            cluster
                .pod_events(pod)
                .iter()
                .any(|e| e == event)
                .then_some(())
        });
        let status = &cluster.pod(pod)["status"];
        assert_eq!(status["phase"], "Pending", "{pod}: {status}");
        let waiting = &status["containerStatuses"][0]["state"]["waiting"];
        assert_eq!(waiting["reason"], "ContainerCreating", "{pod}: {status}");
    }
    let (sandboxes, _) = cluster.runtime_state();
    for pod in ["stuck", "nfs"] {
        assert!(
            !sandboxes
                .iter()
                .any(|s| s.metadata.as_ref().is_some_and(|m| m.name == pod)),
            "{pod} got a sandbox"
        );
    }
}

/// The whole path with the real scheduler and controller manager: a claim on the default class
/// local-path is provisioned on the node of its first pod; what that pod writes the next one
/// reads; deleting the claim deletes the volume and its directory (reclaim Delete).
#[test]
fn a_local_path_claim_keeps_data_across_pods_and_goes_with_its_claim() {
    let mut cluster = Cluster::start("agvlp");
    cluster.start_controller_manager(&[]);
    cluster.start_scheduler();
    let root = cluster.tmp.path().join("local-path-volumes");
    cluster.apply(&format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local-path\n  annotations: {{storageclass.kubernetes.io/is-default-class: \"true\"}}\nprovisioner: rancher.io/local-path\nparameters: {{nodePath: {}}}\nvolumeBindingMode: WaitForFirstConsumer\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 64Mi}}}}\n",
        root.display()
    ));
    // No nodeName: the scheduler places the pods.
    let unplaced = |name: &str| claim_pod(name, "", "data").replace("  nodeName: \n", "");
    cluster.apply(&unplaced("first"));
    assert_eq!(logs_done(&cluster, "first").trim(), "DONE");
    cluster
        .kubectl(&["delete", "pod", "first", "--wait=true"])
        .expect("delete first");
    cluster.apply(&unplaced("second"));
    assert_eq!(logs_done(&cluster, "second").trim(), "by-first\nDONE");
    let pv = cluster
        .kubectl(&["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"])
        .expect("the claim's volume");
    let dir = root.join(&pv);
    let on_host = std::fs::read_to_string(dir.join("log")).expect("the volume's file on the node");
    assert_eq!(on_host, "by-first\nby-second\n");
    cluster
        .kubectl(&["delete", "pod", "second", "--wait=true"])
        .expect("delete second");
    cluster
        .kubectl(&["delete", "pvc", "data", "--wait=false"])
        .expect("delete the claim");
    cluster.wait_until(
        Duration::from_secs(30),
        "the volume and its directory gone",
        || {
            let gone = cluster.kubectl(&["get", "pv", &pv]).is_err();
            (gone && !dir.exists()).then_some(())
        },
    );
}
