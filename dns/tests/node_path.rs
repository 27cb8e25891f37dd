//! The path a pod's query takes on a node set up as scripts/up does it (root): keelson-dns on
//! the pod network's gateway address (bound before that address exists), Service kube-dns at
//! 10.96.0.10 with an EndpointSlice to it, the real keelson-proxy DNATing it, and busybox's
//! nslookup in a "pod" test host asking 10.96.0.10. Everything runs in test hosts.

mod common;

use std::time::Duration;

use keelson_testing::{
    binary, eventually, require_root_and_tools, Apiserver, ChildGuard, Component, TestHost,
};

const GATEWAY: &str = "10.244.0.1";

fn objects() -> String {
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: kube-dns, namespace: kube-system}}
spec:
  clusterIP: 10.96.0.10
  ports:
  - {{name: dns, port: 53, protocol: UDP, targetPort: 53}}
  - {{name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-keelson
  namespace: kube-system
  labels: {{kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: scripts-up.keelson.dev}}
addressType: IPv4
ports: [{{name: dns, port: 53, protocol: UDP}}, {{name: dns-tcp, port: 53, protocol: TCP}}]
endpoints: [{{addresses: ["{GATEWAY}"], conditions: {{ready: true}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  clusterIP: 10.96.100.20
  ports: [{{name: http, port: 80}}]
"#
    )
}

#[test]
fn a_pod_resolves_a_service_through_the_cluster_ip_of_kube_dns() {
    require_root_and_tools(&["busybox", "iptables-restore"]);
    let node = TestHost::create("dnsnode");
    let pod = TestHost::create("dnspod");
    // The API server on an address of the node's loopback.
    node.ip(&["addr", "add", "192.168.254.1/32", "dev", "lo"]);
    let api = Apiserver::start_in(&node, "192.168.254.1", &[]);
    api.apply(&objects());

    // keelson-dns first, on the gateway address that no link has yet (as before a node's first pod).
    let dns_kubeconfig = api.kubeconfig_for("system:kube-dns", &[]);
    let mut dns_cmd = node.command(binary("keelson-dns"));
    dns_cmd.arg("--kubeconfig").arg(&dns_kubeconfig).args([
        "--listen",
        &format!("{GATEWAY}:53"),
        "--health-port",
        "9153",
    ]);
    let _dns = ChildGuard::spawn_logged(&mut dns_cmd, &api.dir.path().join("dns.log"));
    let mut proxy_cmd = node.command(binary("keelson-proxy"));
    proxy_cmd
        .arg("--kubeconfig")
        .arg(api.kubeconfig_of(Component::Proxy))
        .args(["--hostname-override", "node", "--proxy-mode", "iptables"])
        .args([
            "--cluster-cidr",
            "10.244.0.0/16",
            "--min-sync-period",
            "200ms",
        ]);
    let _proxy = ChildGuard::spawn_logged(&mut proxy_cmd, &api.dir.path().join("proxy.log"));

    // Now the "pod": its link to the node, the gateway on the node's end; Services via the gateway.
    node.veth(
        "gw0",
        &format!("{GATEWAY}/24"),
        &pod,
        "eth0",
        "10.244.0.5/24",
    );
    pod.ip(&["route", "add", "10.96.0.0/16", "via", GATEWAY]);

    let out = eventually(
        "nslookup through 10.96.0.10",
        Duration::from_secs(30),
        || {
            let out = pod
                .command("busybox")
                .args(["nslookup", "web.default.svc.cluster.local", "10.96.0.10"])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if text.lines().any(|l| l == "Address: 10.96.100.20") {
                Ok(text)
            } else {
                Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    );
    assert!(
        out.contains("Name:\tweb.default.svc.cluster.local"),
        "{out}"
    );
    // The zone's SOA, and the same question over TCP (the dns-tcp port) from inside the pod.
    let soa = pod
        .command("busybox")
        .args(["nslookup", "-type=soa", "cluster.local", "10.96.0.10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&soa.stdout);
    assert!(text.contains("origin = ns.dns.cluster.local"), "{text}");
    let answer = pod.run_in(|| tcp_query("web.default.svc.cluster.local.", "10.96.0.10:53"));
    assert_eq!(answer, vec!["10.96.100.20".to_string()]);
}

/// One A query over TCP; the addresses answered.
fn tcp_query(name: &str, server: &str) -> Vec<String> {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let mut q = Message::new();
    q.set_id(7)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    common::tcp_exchange(server.parse().unwrap(), &q, Duration::from_secs(5))
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}
