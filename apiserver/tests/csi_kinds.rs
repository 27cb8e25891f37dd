//! The storage.k8s.io kinds CSI drivers' install manifests create and read: served, listed by
//! discovery, printed by kubectl with upstream's columns, applied server-side twice without a
//! change, and a VolumeAttachment without what it must name refused by name.

use keelson_testing::Apiserver;

const MANIFEST: &str = r#"
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: nfs.csi.k8s.io}
spec:
  attachRequired: false
  volumeLifecycleModes: [Persistent]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-a}
spec:
  drivers:
  - {name: nfs.csi.k8s.io, nodeID: node-a, topologyKeys: null}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: csi-attach-1}
spec:
  attacher: nfs.csi.k8s.io
  nodeName: node-a
  source: {persistentVolumeName: pv-1}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: capacity-1, namespace: default}
storageClassName: nfs
capacity: 10Gi
"#;

#[test]
fn csi_kinds_are_served_printed_and_validated() {
    let api = Apiserver::start();
    let resources = api.kubectl_ok(&["api-resources", "--api-group=storage.k8s.io", "-o", "name"]);
    for r in [
        "csidrivers",
        "csinodes",
        "volumeattachments",
        "csistoragecapacities",
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l == format!("{r}.storage.k8s.io")),
            "{r} missing:\n{resources}"
        );
    }

    let apply = |extra: &[&str]| {
        let mut args = vec!["apply", "--server-side", "-f", "-"];
        args.extend(extra);
        let out = api.kubectl_stdin(&args, MANIFEST);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    apply(&[]);
    let diff = api.kubectl_stdin(&["diff", "--server-side", "-f", "-"], MANIFEST);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "a second apply would change: {}{}",
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&diff.stderr)
    );

    let drivers = api.kubectl_ok(&["get", "csidrivers"]);
    let header: Vec<&str> = drivers
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES",
            "AGE"
        ]
    );
    let row: Vec<&str> = drivers
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..7],
        [
            "nfs.csi.k8s.io",
            "false",
            "false",
            "false",
            "<unset>",
            "false",
            "Persistent"
        ]
    );
    let attachments = api.kubectl_ok(&["get", "volumeattachments"]);
    let row: Vec<&str> = attachments
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        ["csi-attach-1", "nfs.csi.k8s.io", "pv-1", "node-a", "false"]
    );
    let nodes = api.kubectl_ok(&["get", "csinodes"]);
    assert!(
        nodes.lines().nth(1).unwrap_or("").starts_with("node-a"),
        "{nodes}"
    );
    let capacity = api.kubectl_ok(&["get", "csistoragecapacities"]);
    let row: Vec<&str> = capacity
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["capacity-1", "nfs", "10Gi"]);

    let bad = api.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {name: bad}\nspec: {source: {}}\n",
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success(),
        "an empty VolumeAttachment was accepted"
    );
    for field in ["spec.attacher", "spec.nodeName", "spec.source"] {
        assert!(err.contains(field), "{field} not named: {err}");
    }
    let moved = api.patch_merge(
        "volumeattachment",
        "csi-attach-1",
        r#"{"spec":{"nodeName":"node-b"}}"#,
    );
    assert!(
        moved.as_ref().is_err_and(|e| e.contains("immutable")),
        "a VolumeAttachment moved to another node: {moved:?}"
    );
}
