//! The Node authorizer and NodeRestriction as a node sees them, with its client certificate
//! (CN system:node:n1, O system:nodes, signed by the data directory's CA) and kubectl.

mod common;

use keelson_testing::{Apiserver, Kubectl};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn node_kubectl(s: &Apiserver, dir: &std::path::Path, node: &str) -> Kubectl {
    let (cert, key) =
        common::client_cert(s, &format!("system:node:{node}"), &["system:nodes"], true);
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}",
        common::b64(cert.as_bytes()),
        common::b64(key.as_bytes())
    );
    common::kubeconfig(s, dir, node, &user)
}

/// Nodes n1 and n2, each with a pod that uses its own Secret and ConfigMap.
fn cluster() -> Apiserver {
    let s = Apiserver::start();
    let mut yaml = String::new();
    for n in ["n1", "n2"] {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {{name: secret-{n}, namespace: default}}\nstringData: {{k: v}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: config-{n}, namespace: default}}\ndata: {{k: v}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{n}, namespace: default}}\nspec:\n  nodeName: {n}\n  containers:\n  - name: c\n    image: nginx\n    envFrom: [{{configMapRef: {{name: config-{n}}}}}]\n  volumes: [{{name: s, secret: {{secretName: secret-{n}}}}}]\n---\n"
        ));
    }
    s.apply(&yaml);
    s
}

fn forbidden(out: std::process::Output, want: &str) {
    let err = stderr(&out);
    assert!(
        !out.status.success()
            && (err.contains("(Forbidden)") || err.contains(" is forbidden: "))
            && err.contains(want),
        "want {want:?} in {err}"
    );
}

#[test]
fn a_node_reads_only_the_secrets_and_config_maps_of_its_pods() {
    let s = cluster();
    let dir = tempfile::tempdir().unwrap();
    let n1 = node_kubectl(&s, dir.path(), "n1");
    assert_eq!(
        n1.ok(&["get", "secret", "secret-n1", "-o", "jsonpath={.data.k}"]),
        "dg=="
    );
    n1.ok(&["get", "configmap", "config-n1"]);
    forbidden(
        n1.output(&["get", "secret", "secret-n2"]),
        r#"secrets "secret-n2" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n1' and this object"#,
    );
    forbidden(
        n1.output(&["get", "configmap", "config-n2"]),
        "no relationship found",
    );
    forbidden(
        n1.output(&["get", "secrets"]),
        "cannot list resource \"secrets\"",
    );
    // A pod moved onto n1 gives it its Secret at once; once the pod is gone, n1 loses it.
    s.kubectl_ok(&["delete", "pod", "pod-n2", "--grace-period=0", "--force"]);
    s.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: moved, namespace: default}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: nginx}]\n  volumes: [{name: s, secret: {secretName: secret-n2}}]\n");
    n1.ok(&["get", "secret", "secret-n2"]);
    s.kubectl_ok(&["delete", "pod", "moved", "--grace-period=0", "--force"]);
    forbidden(
        n1.output(&["get", "secret", "secret-n2"]),
        "no relationship found",
    );
    // What every node reads.
    n1.ok(&["get", "nodes"]);
    // Pods: only its own, listed by the spec.nodeName field selector as the agent does.
    let own = n1.ok(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=n1",
        "-o",
        "name",
    ]);
    assert_eq!(own.trim(), "pod/pod-n1");
    n1.ok(&["get", "pod", "pod-n1"]);
    // Listing every pod is allowed (keelson:network-policy: the node's policy enforcer selects
    // peers cluster-wide); writes to other nodes' pods stay refused (the test below).
    let all = n1.ok(&["get", "pods", "-A", "-o", "name"]);
    assert!(all.contains("pod/pod-n1"), "{all}");
    n1.ok(&["get", "services"]);
}

#[test]
fn a_node_writes_only_its_own_node_and_the_status_of_its_own_pods() {
    let s = cluster();
    let dir = tempfile::tempdir().unwrap();
    let n1 = node_kubectl(&s, dir.path(), "n1");
    let ready = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok"}]}}"#;
    n1.ok(&[
        "patch",
        "node",
        "n1",
        "--subresource=status",
        "--type=merge",
        "-p",
        ready,
    ]);
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "node",
            "n1",
            "-o",
            "jsonpath={.status.conditions[0].reason}"
        ]),
        "KubeletReady"
    );
    n1.ok(&["label", "node", "n1", "zone=a"]);
    forbidden(
        n1.output(&[
            "patch",
            "node",
            "n2",
            "--subresource=status",
            "--type=merge",
            "-p",
            ready,
        ]),
        r#"nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2""#,
    );
    forbidden(
        n1.output(&["label", "node", "n2", "zone=a"]),
        r#"node "n1" is not allowed to modify node "n2""#,
    );
    forbidden(
        n1.output(&["delete", "node", "n2"]),
        r#"cannot delete resource "nodes""#,
    );

    let running = r#"{"status":{"phase":"Running"}}"#;
    n1.ok(&[
        "patch",
        "pod",
        "pod-n1",
        "--subresource=status",
        "--type=merge",
        "-p",
        running,
    ]);
    forbidden(
        n1.output(&[
            "patch",
            "pod",
            "pod-n2",
            "--subresource=status",
            "--type=merge",
            "-p",
            running,
        ]),
        r#"pods "pod-n2" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself"#,
    );
    forbidden(
        n1.output(&["delete", "pod", "pod-n2"]),
        "can only delete pods with spec.nodeName set to itself",
    );
    assert_eq!(
        s.kubectl_ok(&["get", "pod", "pod-n2", "-o", "jsonpath={.status.phase}"]),
        "Pending"
    );

    forbidden(
        n1.output(&[
            "run",
            "sneaky",
            "--image=nginx",
            "--overrides",
            r#"{"spec":{"nodeName":"n1"}}"#,
        ]),
        r#"pods "sneaky" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods"#,
    );
    forbidden(
        n1.output(&["create", "deployment", "web", "--image=nginx"]),
        "cannot create resource \"deployments\"",
    );
    forbidden(
        n1.output(&["create", "namespace", "mine"]),
        "cannot create resource \"namespaces\"",
    );
}

#[test]
fn a_node_keeps_only_its_own_lease() {
    let s = cluster();
    let dir = tempfile::tempdir().unwrap();
    let n1 = node_kubectl(&s, dir.path(), "n1");
    let lease = |name: &str| {
        format!("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {name}, namespace: kube-node-lease}}\nspec: {{holderIdentity: {name}, leaseDurationSeconds: 40}}\n")
    };
    let out = n1.with_stdin(&["create", "-f", "-"], &lease("n1"));
    assert!(out.status.success(), "{}", stderr(&out));
    n1.ok(&["-n", "kube-node-lease", "get", "lease", "n1"]);
    forbidden(
        n1.with_stdin(&["create", "-f", "-"], &lease("n2")),
        "can only access node lease with the same name as the requesting node",
    );
    s.apply(&lease("n2"));
    forbidden(
        n1.output(&["-n", "kube-node-lease", "delete", "lease", "n2"]),
        "can only access node lease with the same name",
    );
}

/// A local volume pinned to a node (one kubernetes.io/hostname term) is that node's to read
/// and patch (its agent removes the directory, then the finalizer); a volume of another node is
/// not, until a pod of this node uses a claim bound to it. Through the store's keys, as the
/// agent meets it, not the graph alone.
#[test]
fn a_node_reads_its_local_volumes_and_those_of_its_pods_claims() {
    let s = cluster();
    let mut yaml = String::new();
    for n in ["n1", "n2"] {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-{n}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  hostPath: {{path: /tmp/pv-{n}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{n}]}}]\n---\n"
        ));
    }
    s.apply(&yaml);
    let dir = tempfile::tempdir().unwrap();
    let n1 = node_kubectl(&s, dir.path(), "n1");
    n1.ok(&["get", "pv", "pv-n1"]);
    forbidden(
        n1.output(&["get", "pv", "pv-n2"]),
        "no relationship found between node 'n1' and this object",
    );
    // A pod on n1 whose claim is bound to pv-n2 links n1 to that volume.
    s.apply("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: \"\"\n  volumeName: pv-n2\n  resources: {requests: {storage: 1Gi}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: uses-claim, namespace: default}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: nginx}]\n  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]\n");
    n1.ok(&["get", "pvc", "data"]);
    n1.ok(&["get", "pv", "pv-n2"]);
}
