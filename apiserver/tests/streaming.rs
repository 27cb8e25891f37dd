//! pods/exec, pods/attach and pods/portforward as kubectl 1.32 meets them before any agent is
//! involved: listed in discovery, authorized by RBAC as upstream (view may not, edit may), and
//! the Pod's missing node named. The streams themselves are tested with a real agent and
//! containerd in keelson-agent's tests/streaming.rs.

mod common;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn connect_subresources_are_discovered_authorized_and_routed_to_the_pods_node() {
    let (s, alice, _dir) = common::server_knowing_alice();
    s.kubectl_ok(&["create", "namespace", "dev"]);
    s.kubectl_ok(&["-n", "dev", "run", "web", "--image=busybox"]);
    // kubectl port-forward checks the phase itself.
    s.kubectl_ok(&[
        "-n",
        "dev",
        "patch",
        "pod",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running"}}"#,
    ]);

    let list: serde_json::Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "--raw", "/api/v1"])).unwrap();
    for (name, kind) in [
        ("pods/exec", "PodExecOptions"),
        ("pods/attach", "PodAttachOptions"),
        ("pods/portforward", "PodPortForwardOptions"),
    ] {
        let entry = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in discovery"));
        assert_eq!(entry["kind"], kind);
        assert_eq!(
            entry["verbs"],
            serde_json::json!(["create", "get"]),
            "{name}"
        );
    }

    // view does not open a shell, attach or forward a port.
    common::bind_alice(&s, "dev", "view");
    let tries: [&[&str]; 3] = [
        &["-n", "dev", "exec", "web", "--", "true"],
        &["-n", "dev", "attach", "web"],
        &["-n", "dev", "port-forward", "pod/web", "18080:80"],
    ];
    for args in tries {
        let out = alice.output(args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} as view: {err}");
        assert!(err.contains("forbidden"), "{args:?} as view: {err}");
        assert!(err.contains("User \"alice\""), "{args:?}: {err}");
    }

    // edit may; the request then stops at the Pod, which no node runs yet.
    common::bind_alice(&s, "dev", "edit");
    let out = alice.output(&["-n", "dev", "exec", "web", "--", "true"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("does not have a host assigned"), "{err}");

    // A Pod bound to a node that never registered: the node is named.
    s.kubectl_ok(&["-n", "dev", "delete", "pod", "web", "--wait=false"]);
    s.kubectl_cmd().apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bound, namespace: dev}\nspec:\n  nodeName: gone\n  containers: [{name: c, image: busybox}]\n",
    );
    let out = alice.output(&["-n", "dev", "exec", "bound", "--", "true"]);
    let err = stderr(&out);
    assert!(
        err.contains("node gone") && err.contains("not registered"),
        "{err}"
    );
}
