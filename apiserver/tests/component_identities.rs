//! Components' own identities: `keelson-apiserver kubeconfig` issues a kubeconfig whose client
//! certificate names the component, and the bootstrap RBAC policy gives each only what it needs.

use keelson_testing::{Apiserver, Kubectl};

#[test]
fn each_component_is_itself_and_only_the_admin_is_admin() {
    let s = Apiserver::start();
    let as_user = |user: &str, groups: &[&str]| Kubectl::new(s.kubeconfig_for(user, groups));
    let proxy = as_user("system:kube-proxy", &[]);
    let who = proxy.ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(who, "system:kube-proxy");
    let node = as_user("system:node:n1", &["system:nodes"]);
    let groups = node.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"]);
    assert!(groups.contains("system:nodes"), "{groups}");

    // The proxy reads Services and EndpointSlices everywhere, and writes no Pods or Secrets.
    proxy.ok(&["get", "services,endpointslices", "-A"]);
    let err = proxy.run(&["get", "secrets", "-A"]).unwrap_err();
    assert!(
        err.contains("Forbidden") && err.contains("system:kube-proxy"),
        "{err}"
    );
    let err = proxy.run(&["run", "x", "--image=busybox"]).unwrap_err();
    assert!(err.contains("Forbidden"), "{err}");

    // The scheduler binds pods; it reads no Secrets.
    let scheduler = as_user("system:kube-scheduler", &[]);
    scheduler.ok(&["get", "pods,nodes", "-A"]);
    assert!(scheduler.run(&["get", "secrets", "-A"]).is_err());

    // The controller manager and the ingress controller: their own reads, not everything.
    let cm = as_user("system:kube-controller-manager", &[]);
    cm.ok(&["get", "deployments,replicasets,pods", "-A"]);
    let escalate = "create clusterrolebinding me --clusterrole=cluster-admin --user=me";
    let err = cm
        .run(&escalate.split(' ').collect::<Vec<_>>())
        .unwrap_err();
    assert!(err.contains("cannot create resource"), "{err}");
    let ingress = as_user("keelson:ingress-controller", &[]);
    ingress.ok(&["get", "ingresses,services,endpointslices", "-A"]);
    assert!(ingress.run(&["create", "namespace", "mine"]).is_err());

    // The admin kubeconfig is still admin.
    s.kubectl_ok(&["create", "namespace", "mine"]);
}
