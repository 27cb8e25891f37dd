//! The service-account and root-CA-publisher controllers against a real keelson-apiserver,
//! run by the controller manager with its own identity (system:kube-controller-manager): a new
//! namespace gets ServiceAccount `default` and ConfigMap kube-root-ca.crt holding the API
//! server's CA; both come back when deleted or edited.

use std::process::Command;
use std::time::Duration;

use keelson_testing::{binary, eventually, free_port, Apiserver, ChildGuard};

fn controller_manager(api: &Apiserver) -> ChildGuard {
    let dir = api.dir.path();
    let kubeconfig = api.kubeconfig_for("system:kube-controller-manager", &[]);
    let mut cmd = Command::new(binary("keelson-controller-manager"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--root-ca-file")
        .arg(dir.join("ca.crt"));
    ChildGuard::spawn_logged(&mut cmd, &dir.join("controller-manager.log"))
}

fn get(api: &Apiserver, args: &[&str]) -> Result<String, String> {
    api.kubectl_cmd().run(args)
}

/// The CA the root-CA publisher wrote into `ns`'s ConfigMap kube-root-ca.crt.
fn published_ca(api: &Apiserver, ns: &str) -> Result<String, String> {
    let path = "jsonpath={.data.ca\\.crt}";
    get(
        api,
        &["-n", ns, "get", "configmap", "kube-root-ca.crt", "-o", path],
    )
}

#[test]
fn new_namespaces_get_default_service_account_and_root_ca() {
    let api = Apiserver::start();
    let _cm = controller_manager(&api);
    let log = || {
        std::fs::read_to_string(api.dir.path().join("controller-manager.log")).unwrap_or_default()
    };
    let ca = std::fs::read_to_string(api.dir.path().join("ca.crt")).unwrap();
    api.kubectl_ok(&["create", "namespace", "team"]);
    let wait = Duration::from_secs(20);
    eventually("ServiceAccount team/default", wait, || {
        get(&api, &["-n", "team", "get", "serviceaccount", "default"])
            .map_err(|e| format!("{e}\n{}", log()))
    });
    let published = eventually("ConfigMap team/kube-root-ca.crt", wait, || {
        published_ca(&api, "team").map_err(|e| format!("{e}\n{}", log()))
    });
    assert_eq!(published, ca);
    // The namespaces made at the server's start have them too.
    for ns in ["default", "kube-system"] {
        eventually(&format!("{ns}/default"), wait, || {
            get(&api, &["-n", ns, "get", "serviceaccount", "default"])
        });
        eventually(&format!("{ns}/kube-root-ca.crt"), wait, || {
            get(&api, &["-n", ns, "get", "configmap", "kube-root-ca.crt"])
        });
    }

    // Deleted or edited, they are put back.
    api.kubectl_ok(&["-n", "team", "delete", "serviceaccount", "default"]);
    api.kubectl_ok(&[
        "-n",
        "team",
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"tampered"}}"#,
    ]);
    eventually("ServiceAccount team/default again", wait, || {
        get(&api, &["-n", "team", "get", "serviceaccount", "default"])
    });
    eventually("kube-root-ca.crt restored", wait, || {
        let now = published_ca(&api, "team")?;
        (now == ca).then_some(()).ok_or(now)
    });

    // A namespace being deleted gets nothing new, and goes away.
    api.kubectl_ok(&[
        "delete",
        "namespace",
        "team",
        "--wait=true",
        "--timeout=30s",
    ]);
    assert!(get(&api, &["get", "namespace", "team"]).is_err());
}
