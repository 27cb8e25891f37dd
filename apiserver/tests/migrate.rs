//! `keelson-apiserver migrate --from sqlite:DIR --to etcd:URL`: every object made on SQLite is
//! there on etcd (same uid), the same data directory serves them with kubectl, a second run
//! copies nothing, and a target holding another cluster's objects is refused.

use keelson_testing::{Apiserver, Etcd};
use std::path::Path;
use std::process::Command;

/// `keelson-apiserver migrate ARGS`: (success, stdout + stderr).
fn migrate(dir: &Path, etcd: &Etcd) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keelson-apiserver"))
        .arg("migrate")
        .arg("--from")
        .arg(format!("sqlite:{}", dir.display()))
        .arg("--to")
        .arg(format!("etcd:{}", etcd.endpoints()))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

const OBJECTS: &[(&str, &str)] = &[
    ("namespace", "shop"),
    ("configmap", "shop/settings"),
    ("secret", "shop/password"),
    ("service", "shop/web"),
    ("serviceaccount", "shop/robot"),
    ("role", "shop/reader"),
    ("deployment", "shop/web"),
];

/// The uid of each object in OBJECTS, as `s` serves it.
fn uids(s: &Apiserver) -> Vec<String> {
    OBJECTS
        .iter()
        .map(|(kind, name)| {
            let (ns, name) = name.split_once('/').unwrap_or(("", name));
            let mut args = vec!["get", kind, name, "-o", "jsonpath={.metadata.uid}"];
            if !ns.is_empty() {
                args.extend(["-n", ns]);
            }
            s.kubectl_ok(&args)
        })
        .collect()
}

#[test]
fn objects_made_on_sqlite_are_served_from_etcd_after_migrate() {
    let etcd = Etcd::start();
    let mut s = Apiserver::start();
    s.kubectl_ok(&["create", "namespace", "shop"]);
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "configmap",
        "settings",
        "--from-literal=color=blue",
    ]);
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "secret",
        "generic",
        "password",
        "--from-literal=p=s3cret",
    ]);
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "service",
        "nodeport",
        "web",
        "--tcp=80:8080",
    ]);
    s.kubectl_ok(&["-n", "shop", "create", "serviceaccount", "robot"]);
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "role",
        "reader",
        "--verb=get",
        "--resource=pods",
    ]);
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "deployment",
        "web",
        "--image=busybox",
    ]);
    let before = uids(&s);
    let web_ip = s.kubectl_ok(&[
        "-n",
        "shop",
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);

    // Not while the server runs: the copy would miss what it writes meanwhile.
    let (ok, out) = migrate(s.dir.path(), &etcd);
    assert!(
        !ok && out.contains("in use by another keelson-apiserver"),
        "{out}"
    );
    s.stop();
    let (ok, out) = migrate(s.dir.path(), &etcd);
    assert!(ok, "{out}");
    assert!(
        out.contains("copied (0 overwritten), 0 already in etcd"),
        "{out}"
    );
    // Again: nothing left to copy.
    let (ok, again) = migrate(s.dir.path(), &etcd);
    assert!(
        ok && again.contains(": 0 copied (0 overwritten)"),
        "{again}"
    );

    // The same data directory (its PKI and admin token) on etcd serves every object.
    s.restart_with(&["--etcd-servers", &etcd.endpoints()]);
    assert!(s.log().contains("storing objects in etcd"), "{}", s.log());
    assert_eq!(uids(&s), before);
    let color = s.kubectl_ok(&[
        "-n",
        "shop",
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.data.color}",
    ]);
    assert_eq!(color, "blue");
    s.kubectl_ok(&[
        "-n",
        "shop",
        "create",
        "configmap",
        "after",
        "--from-literal=k=v",
    ]);
    s.kubectl_ok(&["-n", "shop", "delete", "secret", "password"]);
    // The allocations came along: web's address is still taken.
    let taken = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: copy, namespace: shop}}\nspec: {{clusterIP: {web_ip}, ports: [{{port: 80}}]}}\n"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &taken);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("already allocated"),
        "{err}"
    );

    // Another cluster's data into the same etcd is refused.
    let mut other = Apiserver::start();
    other.stop();
    let (ok, out) = migrate(other.dir.path(), &etcd);
    assert!(!ok && out.contains("etcd already holds"), "{out}");
}
