//! networking.k8s.io/v1 NetworkPolicy through the machine's kubectl: discovery and the `netpol`
//! short name, apply/get/describe/delete, upstream's validation messages, and what the
//! enforcer's identities (the proxy's, or a node's) may read.

use keelson_testing::{Apiserver, Kubectl};

/// Ingress to app=db pods from role=client pods of team=web namespaces, on a named port and a
/// numeric port range. The protocols are written out: `ingress` is a list without a merge key,
/// so a field the server defaults inside it makes every later apply "configured" (upstream
/// kubernetes#66450), as against kube-apiserver.
const POLICY: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
  namespace: default
spec:
  podSelector:
    matchLabels:
      app: db
    matchExpressions:
    - {key: tier, operator: In, values: [data, backend]}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels: {team: web}
      podSelector:
        matchLabels: {role: client}
    ports:
    - port: postgres
      protocol: TCP
    - port: 5432
      endPort: 5440
      protocol: TCP
"#;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn discovery_lists_networkpolicies_with_the_netpol_short_name() {
    let s = Apiserver::start();
    let out = s.kubectl_ok(&["api-resources", "--api-group=networking.k8s.io"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("networkpolicies "))
        .unwrap_or_else(|| panic!("no networkpolicies in {out}"));
    assert_eq!(
        words(row),
        [
            "networkpolicies",
            "netpol",
            "networking.k8s.io/v1",
            "true",
            "NetworkPolicy"
        ]
    );
}

#[test]
fn apply_get_describe_and_delete_a_policy() {
    let s = Apiserver::start();
    let created = s.apply(POLICY);
    assert!(
        created.contains("networkpolicy.networking.k8s.io/db created"),
        "{created}"
    );
    let again = s.apply(POLICY);
    assert!(again.contains("unchanged"), "{again}");

    let table = s.kubectl_ok(&["get", "netpol"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(words(lines[0]), ["NAME", "POD-SELECTOR", "AGE"], "{table}");
    // Cells are apart by two spaces or more; a selector may hold single spaces.
    let cells: Vec<&str> = lines[1]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        &cells[..2],
        ["db", "app=db,tier in (backend,data)"],
        "{table}"
    );

    // Upstream's default policy types: Ingress, and Egress only with egress rules.
    let stored = s.jsonpath_ok(
        &["networkpolicy", "db"],
        "{.spec.policyTypes} {.spec.ingress[0].ports[1].endPort}",
    );
    assert_eq!(stored, r#"["Ingress"] 5440"#);

    let described = s.kubectl_ok(&["describe", "netpol", "db"]);
    for want in [
        "PodSelector:     app=db,tier in (backend,data)",
        "NamespaceSelector: team=web",
        "PodSelector: role=client",
        "To Port: postgres/TCP",
        "Policy Types: Ingress",
    ] {
        assert!(described.contains(want), "want {want:?} in {described}");
    }

    // The rules have no merge key upstream: an applied edit replaces them; a port without a
    // protocol gets TCP.
    let edited = POLICY
        .replace("    - port: postgres\n      protocol: TCP\n", "")
        .replace(
            "      endPort: 5440\n      protocol: TCP\n",
            "      endPort: 5440\n",
        );
    let out = s.apply(&edited);
    assert!(
        out.contains("networkpolicy.networking.k8s.io/db configured"),
        "{out}"
    );
    let ports = s.jsonpath_ok(
        &["netpol", "db"],
        "{.spec.ingress[0].ports[*].port} {.spec.ingress[0].ports[*].protocol}",
    );
    assert_eq!(ports, "5432 TCP");

    // Server-side apply, with egress to an address block: Egress joins the default types.
    let egress = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: out, namespace: default}
spec:
  podSelector: {}
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/8, except: [10.96.0.0/16]}
"#;
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], egress);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("networkpolicy.networking.k8s.io/out serverside-applied"),
        "{text}{}",
        stderr(&out)
    );
    let out_row = s.kubectl_ok(&["get", "netpol", "out", "--no-headers"]);
    assert_eq!(&words(&out_row)[..2], ["out", "<none>"], "{out_row}");
    let types = s.kubectl_ok(&["get", "netpol", "out", "-o", "jsonpath={.spec.policyTypes}"]);
    assert_eq!(types, r#"["Ingress","Egress"]"#);

    let deleted = s.kubectl_ok(&["delete", "netpol", "db"]);
    assert!(
        deleted.contains(r#"networkpolicy.networking.k8s.io "db" deleted"#),
        "{deleted}"
    );
    let gone = s.kubectl(&["get", "netpol", "db"]);
    assert!(
        !gone.status.success() && stderr(&gone).contains("NotFound"),
        "{}",
        stderr(&gone)
    );
}

#[test]
fn invalid_policies_are_refused_naming_the_field() {
    let s = Apiserver::start();
    let bad = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: default}
spec:
  podSelector: {}
  ingress:
  - ports:
    - {port: 8080, endPort: 80}
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], bad);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    for want in [
        r#"The NetworkPolicy "bad" is invalid"#,
        "spec.ingress[0].ports[0].endPort: Invalid value: 8080: must be greater than or equal to `port`",
        r#"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`"#,
    ] {
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    let none = s.kubectl_ok(&["get", "netpol", "-o", "name"]);
    assert_eq!(none.trim(), "", "nothing was stored");
}

/// kubectl's answer to `auth can-i ARGS`: "yes" or "no" (without the reason after a "no").
fn can_i(k: &Kubectl, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = String::from_utf8_lossy(&k.output(&all).stdout).into_owned();
    out.split_whitespace().next().unwrap_or("").to_string()
}

#[test]
fn the_enforcer_reads_policies_pods_and_namespaces_cluster_wide() {
    let s = Apiserver::start();
    s.apply(POLICY);
    s.kubectl_ok(&["create", "namespace", "web"]);
    s.kubectl_ok(&[
        "-n",
        "web",
        "run",
        "client",
        "--image=busybox",
        "--labels=role=client",
    ]);
    let proxy = Kubectl::new(s.kubeconfig_for("system:kube-proxy", &[]));
    for what in ["networkpolicies", "pods", "namespaces"] {
        for verb in ["list", "watch"] {
            let answer = can_i(&proxy, &[verb, what, "--all-namespaces"]);
            assert_eq!(answer, "yes", "{verb} {what}");
        }
    }
    assert_eq!(can_i(&proxy, &["create", "events", "-n", "web"]), "yes");
    assert_eq!(
        can_i(&proxy, &["create", "networkpolicies", "-n", "web"]),
        "no"
    );
    assert_eq!(
        can_i(&proxy, &["list", "secrets", "--all-namespaces"]),
        "no"
    );
    // The same reads as real requests, not only as access reviews.
    let pods = proxy.ok(&["get", "pods", "-A", "-o", "name"]);
    assert!(pods.contains("pod/client"), "{pods}");
    let policies = proxy.ok(&["get", "netpol", "-A", "-o", "name"]);
    assert!(
        policies.contains("networkpolicy.networking.k8s.io/db"),
        "{policies}"
    );
    let namespaces = proxy.ok(&["get", "namespaces", "-o", "name"]);
    assert!(namespaces.contains("namespace/web"), "{namespaces}");
    // On joined machines the enforcer runs with the node's credentials: they read the same,
    // and still write no policy.
    let node = Kubectl::new(s.kubeconfig_for("system:node:x", &["system:nodes"]));
    assert_eq!(can_i(&node, &["list", "pods", "--all-namespaces"]), "yes");
    assert_eq!(
        can_i(&node, &["watch", "networkpolicies", "--all-namespaces"]),
        "yes"
    );
    assert_eq!(
        can_i(&node, &["create", "networkpolicies", "-n", "web"]),
        "no"
    );
}
