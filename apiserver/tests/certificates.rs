//! CertificateSigningRequests and DaemonSets through the machine's kubectl: what a node's TLS
//! bootstrap and a DaemonSet controller rely on.

mod common;

use common::{b64, csr_yaml};
use keelson_testing::Apiserver;

#[test]
fn csr_requester_is_the_authenticated_user_and_approval_is_its_own_subresource() {
    let s = Apiserver::start();
    // The client's claim to be someone else is ignored.
    let spoof = "  username: system:node:other\n  groups: [system:masters, x]\n";
    s.apply(&csr_yaml("node-csr-a", spoof));
    let got = s.kubectl_ok(&["get", "csr"]);
    let row = got.lines().nth(1).unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        got.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ]
    );
    assert_eq!(cells[0], "node-csr-a");
    assert_eq!(
        cells[2..],
        [
            "kubernetes.io/kube-apiserver-client-kubelet",
            "keelson-admin",
            "<none>",
            "Pending"
        ]
    );
    let groups = s.kubectl_ok(&["get", "csr", "node-csr-a", "-o", "jsonpath={.spec.groups}"]);
    assert_eq!(groups, r#"["system:masters","system:authenticated"]"#);

    // kubectl certificate approve writes through /approval.
    let out = s.kubectl_ok(&["certificate", "approve", "node-csr-a"]);
    assert!(out.contains("approved"), "{out}");
    let cond = s.kubectl_ok(&[
        "get",
        "csr",
        "node-csr-a",
        "-o",
        "jsonpath={.status.conditions[0].type}/{.status.conditions[0].reason}",
    ]);
    assert_eq!(cond, "Approved/KubectlApprove");

    // The status subresource writes the certificate but cannot take the approval away.
    let cert = rcgen::generate_simple_self_signed(vec!["n1".to_string()]).unwrap();
    let patch = format!(
        r#"{{"status":{{"conditions":[],"certificate":"{}"}}}}"#,
        b64(cert.cert.pem().as_bytes())
    );
    s.kubectl_ok(&[
        "patch",
        "csr",
        "node-csr-a",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        &patch,
    ]);
    let row = s.kubectl_ok(&["get", "csr", "node-csr-a", "--no-headers"]);
    assert!(row.trim_end().ends_with("Approved,Issued"), "{row}");
    // Writes to the main resource change neither the spec nor the status.
    let meta = r#"{"metadata":{"labels":{"a":"b"}},"spec":{"username":"x"},"status":{"certificate":null}}"#;
    s.kubectl_ok(&["patch", "csr", "node-csr-a", "--type", "merge", "-p", meta]);
    let row = s.kubectl_ok(&["get", "csr", "node-csr-a", "--no-headers", "--show-labels"]);
    assert!(
        row.contains("keelson-admin") && row.contains("Approved,Issued") && row.contains("a=b"),
        "{row}"
    );
}

#[test]
fn csr_needs_a_certificate_request_and_approved_excludes_denied() {
    let s = Apiserver::start();
    let bad = csr_yaml("bad", "").replace(
        "request: ",
        &format!("request: {}\n  x-was: ", b64(b"not a request")),
    );
    let out = s.kubectl_stdin(&["create", "--validate=false", "-f", "-"], &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.request: Invalid value: \"<omitted>\": PEM block type must be CERTIFICATE REQUEST"),
        "{err}"
    );
    s.apply(&csr_yaml("node-csr-b", ""));
    s.kubectl_ok(&["certificate", "deny", "node-csr-b"]);
    let both = r#"{"status":{"conditions":[{"type":"Denied","status":"True"},{"type":"Approved","status":"True"}]}}"#;
    let out = s.kubectl(&[
        "patch",
        "csr",
        "node-csr-b",
        "--subresource",
        "approval",
        "--type",
        "merge",
        "-p",
        both,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Approved and Denied conditions are mutually exclusive"),
        "{err}"
    );
    let row = s.kubectl_ok(&["get", "csr", "node-csr-b", "--no-headers"]);
    assert!(row.trim_end().ends_with("Denied"), "{row}");
}

#[test]
fn daemonset_is_served_with_its_defaults_and_columns() {
    let s = Apiserver::start();
    s.apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  selector:\n    matchLabels: {app: agent}\n  template:\n    metadata:\n      labels: {app: agent}\n    spec:\n      nodeSelector: {kubernetes.io/os: linux}\n      containers: [{name: agent, image: busybox}]\n",
    );
    let got = s.kubectl_ok(&["get", "ds"]);
    let lines: Vec<Vec<&str>> = got
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ]
    );
    assert_eq!(
        lines[1][..7],
        ["agent", "0", "0", "0", "0", "0", "kubernetes.io/os=linux"]
    );
    let strategy = s.kubectl_ok(&[
        "get",
        "daemonset",
        "agent",
        "-o",
        "jsonpath={.spec.updateStrategy}",
    ]);
    assert_eq!(
        strategy,
        r#"{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1},"type":"RollingUpdate"}"#
    );
    // The status subresource is where a controller writes its counts.
    let status = r#"{"status":{"desiredNumberScheduled":2,"currentNumberScheduled":2,"numberReady":1,"updatedNumberScheduled":2,"numberAvailable":1,"numberMisscheduled":0}}"#;
    s.kubectl_ok(&[
        "patch",
        "ds",
        "agent",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        status,
    ]);
    let row = s.kubectl_ok(&["get", "ds", "agent", "--no-headers"]);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..6], ["2", "2", "1", "2", "1"]);
    assert!(s
        .kubectl_ok(&["get", "all"])
        .contains("daemonset.apps/agent"));
}
