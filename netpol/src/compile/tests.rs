use super::*;
use serde_json::json;

fn pod(ns: &str, name: &str, app: &str, ip: &str, node: &str) -> PodInfo {
    PodInfo {
        namespace: ns.into(),
        name: name.into(),
        labels: [("app".to_string(), app.to_string())].into(),
        ip: ip.parse().unwrap(),
        node: node.into(),
        ports: Vec::new(),
    }
}

fn ns(name: &str, team: &str) -> NamespaceInfo {
    NamespaceInfo {
        name: name.into(),
        labels: [("team".to_string(), team.to_string())].into(),
    }
}

fn policy(v: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(v).unwrap()
}

fn elements(rs: &Ruleset, set: &str) -> Vec<String> {
    rs.sets[set].elements.iter().cloned().collect()
}

fn world() -> (Vec<PodInfo>, Vec<NamespaceInfo>) {
    let mut web = pod("a", "web", "web", "10.244.0.2", "n1");
    web.ports.push(crate::from_k8s::NamedPort {
        name: "http".into(),
        protocol: "TCP".into(),
        port: 8080,
    });
    let pods = vec![
        web,
        pod("a", "db", "db", "10.244.0.3", "n1"),
        pod("a", "web2", "web", "10.244.1.2", "n2"),
        pod("b", "client", "client", "10.244.1.3", "n2"),
    ];
    (pods, vec![ns("a", "x"), ns("b", "y")])
}

fn deny_all() -> NetworkPolicy {
    policy(json!({"metadata": {"name": "deny", "namespace": "a"}, "spec": {"podSelector": {}}}))
}

#[test]
fn no_policy_no_table() {
    let (pods, nss) = world();
    let c = compile::<NetworkPolicy>("n1", &[], &pods, &nss);
    assert!(c.ruleset.is_empty());
}

#[test]
fn default_deny_isolates_only_this_nodes_pods_and_allows_nothing() {
    let (pods, nss) = world();
    let c = compile("n1", &[deny_all()], &pods, &nss);
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let rs = &c.ruleset;
    assert_eq!(
        elements(rs, "ingress_isolated"),
        ["10.244.0.2", "10.244.0.3"]
    );
    assert!(
        elements(rs, "egress_isolated").is_empty(),
        "no Egress type: egress open"
    );
    let id = policy_id("a/deny");
    assert_eq!(rs.chains[&format!("{id}_in")], Vec::<String>::new());
    assert_eq!(
        rs.chains["ingress"],
        [
            format!("ip daddr @{id}_sel jump {id}_in comment \"a/deny\""),
            "meta mark and 0x20000 == 0 counter drop".to_string()
        ]
    );
    // The same policy seen from n2 isolates n2's pod of namespace a only.
    let c2 = compile("n2", &[deny_all()], &pods, &nss);
    assert_eq!(elements(&c2.ruleset, "ingress_isolated"), ["10.244.1.2"]);
}

#[test]
fn peers_from_namespace_and_pod_selectors_and_named_ports() {
    let (pods, nss) = world();
    let p = policy(
        json!({"metadata": {"name": "web", "namespace": "a"}, "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{
            "from": [
                {"namespaceSelector": {"matchLabels": {"team": "y"}}},
                {"podSelector": {"matchLabels": {"app": "db"}}}
            ],
            "ports": [{"port": "http"}, {"port": 9000, "endPort": 9100, "protocol": "UDP"}]
        }]}}),
    );
    let c = compile("n1", &[p], &pods, &nss);
    let id = policy_id("a/web");
    let rs = &c.ruleset;
    assert_eq!(
        elements(rs, &format!("{id}_in0_pods")),
        ["10.244.0.3", "10.244.1.3"]
    );
    // The named port resolves on the receiving pod (web on n1 names http 8080).
    assert_eq!(
        elements(rs, &format!("{id}_in0_named")),
        ["10.244.0.2 . tcp . 8080"]
    );
    let chain = &rs.chains[&format!("{id}_in")];
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert!(chain[0].starts_with(&format!(
        "ip saddr @{id}_in0_pods meta l4proto udp th dport 9000-9100 "
    )));
    assert!(chain[1].contains(&format!(
        "ip daddr . meta l4proto . th dport @{id}_in0_named"
    )));
    assert!(chain
        .iter()
        .all(|r| r.ends_with("meta mark set meta mark or 0x20000 comment \"a/web\"")));
}

#[test]
fn egress_ip_block_with_except() {
    let (pods, nss) = world();
    let p = policy(
        json!({"metadata": {"name": "out", "namespace": "a"}, "spec": {
        "podSelector": {"matchLabels": {"app": "db"}},
        "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.1.0/24"]}}]}]}}),
    );
    let c = compile("n1", &[p], &pods, &nss);
    let id = policy_id("a/out");
    let rs = &c.ruleset;
    assert_eq!(elements(rs, "egress_isolated"), ["10.244.0.3"]);
    assert!(elements(rs, "ingress_isolated").is_empty());
    assert_eq!(
        elements(rs, &format!("{id}_eg0_blocks")),
        ["10.244.0.0-10.244.0.255", "10.244.2.0-10.244.255.255"]
    );
    assert_eq!(
        rs.chains[&format!("{id}_eg")],
        [format!(
            "ip daddr @{id}_eg0_blocks meta mark set meta mark or 0x10000 comment \"a/out\""
        )]
    );
}

#[test]
fn a_broken_peer_allows_nothing_and_is_reported() {
    let (pods, nss) = world();
    let p = policy(
        json!({"metadata": {"name": "bad", "namespace": "a"}, "spec": {
        "podSelector": {},
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/40"}}]}]}}),
    );
    let c = compile("n1", &[p], &pods, &nss);
    assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
    assert!(
        c.problems[0].contains("a/bad") && c.problems[0].contains("10.0.0.0/40"),
        "{:?}",
        c.problems
    );
    let id = policy_id("a/bad");
    assert!(
        c.ruleset.chains[&format!("{id}_in")].is_empty(),
        "fails closed"
    );
}

#[test]
fn input_order_does_not_change_the_ruleset() {
    let (mut pods, mut nss) = world();
    let allow = policy(
        json!({"metadata": {"name": "allow", "namespace": "a"}, "spec": {
        "podSelector": {}, "ingress": [{}]}}),
    );
    let one = compile("n1", &[deny_all(), allow.clone()], &pods, &nss).ruleset;
    pods.reverse();
    nss.reverse();
    let two = compile("n1", &[allow, deny_all()], &pods, &nss).ruleset;
    assert_eq!(one, two);
    assert_eq!(crate::ruleset::render_diff(&one, &two), None);
}
