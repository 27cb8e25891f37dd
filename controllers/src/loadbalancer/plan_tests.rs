use super::*;

const POOL: &str = "172.30.0.200-172.30.0.209";

fn pool(s: &str) -> Pool {
    s.parse().unwrap()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A LoadBalancer Service created on day `day` of January, showing `current`.
fn lb(name: &str, day: u8, current: &[&str]) -> ServiceView {
    ServiceView {
        namespace: "ns".into(),
        name: name.into(),
        resource_version: "7".into(),
        created: Some(format!("2026-01-{day:02}T00:00:00Z").parse().unwrap()),
        wants: Wants::Address,
        requested: None,
        current: current.iter().map(|c| c.to_string()).collect(),
    }
}

fn asking(mut s: ServiceView, requested: &str) -> ServiceView {
    s.requested = Some(requested.into());
    s
}

/// (service, addresses) of every Set.
fn sets(p: &Plan) -> Vec<(String, Vec<String>)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Set { name, ips, .. } => {
                Some((name.clone(), ips.iter().map(|i| i.to_string()).collect()))
            }
            Action::Warn { .. } => None,
        })
        .collect()
}

/// (service, message) of every warning.
fn warnings(p: &Plan) -> Vec<(String, String)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Warn {
                name,
                reason,
                message,
                ..
            } => {
                assert_eq!(*reason, ALLOCATION_FAILED);
                Some((name.clone(), message.clone()))
            }
            Action::Set { .. } => None,
        })
        .collect()
}

fn set_of(name: &str, ips: &[&str]) -> (String, Vec<String>) {
    (name.into(), ips.iter().map(|i| i.to_string()).collect())
}

fn warning(name: &str, message: &str) -> (String, String) {
    (name.into(), message.into())
}

#[test]
fn services_get_the_lowest_free_addresses_oldest_first_with_an_event() {
    let got = plan(
        &pool(POOL),
        &[
            lb("late", 3, &[]),
            lb("kept", 1, &["172.30.0.200"]),
            lb("early", 2, &[]),
        ],
    );
    assert_eq!(
        sets(&got),
        vec![
            set_of("early", &["172.30.0.201"]),
            set_of("late", &["172.30.0.202"])
        ]
    );
    assert_eq!(got.in_use, 3);
    assert_eq!(
        got.actions[0],
        Action::Set {
            namespace: "ns".into(),
            name: "early".into(),
            resource_version: "7".into(),
            ips: vec![ip("172.30.0.201")],
            event: Some("Assigned IP [\"172.30.0.201\"]".into()),
        }
    );
}

#[test]
fn a_status_that_already_holds_the_decision_needs_nothing() {
    let got = plan(
        &pool(POOL),
        &[
            lb("a", 1, &["172.30.0.205"]),
            asking(lb("b", 2, &["172.30.0.200"]), "172.30.0.200"),
        ],
    );
    assert_eq!(got.actions, vec![]);
    assert_eq!(got.in_use, 2);
}

#[test]
fn a_requested_address_is_given_when_free() {
    let got = plan(&pool(POOL), &[asking(lb("a", 1, &[]), "172.30.0.207")]);
    assert_eq!(sets(&got), vec![set_of("a", &["172.30.0.207"])]);
}

#[test]
fn a_changed_request_moves_the_service_to_the_new_address() {
    let got = plan(
        &pool(POOL),
        &[asking(lb("a", 1, &["172.30.0.200"]), "172.30.0.203")],
    );
    assert_eq!(sets(&got), vec![set_of("a", &["172.30.0.203"])]);
}

#[test]
fn a_request_held_by_another_service_names_it_and_clears_a_stale_status() {
    let got = plan(
        &pool(POOL),
        &[
            lb("b", 1, &["172.30.0.201"]),
            asking(lb("d", 2, &[]), "172.30.0.201"),
            // Was given .200, now asks for b's address: it loses .200 too.
            asking(lb("e", 3, &["172.30.0.200"]), "172.30.0.201"),
        ],
    );
    let held = "spec.loadBalancerIP 172.30.0.201 is used by Service ns/b";
    assert_eq!(warnings(&got), vec![warning("d", held), warning("e", held)]);
    assert_eq!(sets(&got), vec![set_of("e", &[])]);
    assert!(matches!(&got.actions[1], Action::Set { event: None, .. }));
    assert_eq!(got.in_use, 1);
}

#[test]
fn requests_outside_the_pool_or_not_ipv4_are_refused_with_the_reason() {
    let got = plan(
        &pool(POOL),
        &[
            asking(lb("out", 1, &[]), "10.1.1.1"),
            asking(lb("junk", 2, &[]), "x"),
            asking(lb("v6", 3, &[]), "fd00::1"),
        ],
    );
    assert_eq!(
        warnings(&got),
        vec![
            warning(
                "out",
                "spec.loadBalancerIP 10.1.1.1 is not in the pool 172.30.0.200-172.30.0.209"
            ),
            warning("junk", "spec.loadBalancerIP \"x\" is not an IPv4 address"),
            warning(
                "v6",
                "spec.loadBalancerIP \"fd00::1\" is not an IPv4 address"
            ),
        ]
    );
    assert_eq!(sets(&got), vec![]);
}

#[test]
fn an_exhausted_pool_warns_and_a_freed_address_goes_to_the_waiting_service() {
    let small = pool("10.250.0.10-10.250.0.11");
    let a = lb("a", 1, &["10.250.0.10"]);
    let b = lb("b", 2, &["10.250.0.11"]);
    let c = lb("c", 3, &[]);
    let full = plan(&small, &[a, b.clone(), c.clone()]);
    assert_eq!(
        warnings(&full),
        vec![warning(
            "c",
            "no address left in the pool 10.250.0.10-10.250.0.11 (2 in use)"
        )]
    );
    assert_eq!(sets(&full), vec![]);
    // a deleted: absent from the list.
    let freed = plan(&small, &[b, c]);
    assert_eq!(sets(&freed), vec![set_of("c", &["10.250.0.10"])]);
    assert_eq!(warnings(&freed), vec![]);
}

#[test]
fn of_two_services_showing_one_address_the_older_keeps_it() {
    let got = plan(
        &pool(POOL),
        &[
            lb("young", 5, &["172.30.0.200"]),
            lb("old", 1, &["172.30.0.200"]),
        ],
    );
    assert_eq!(sets(&got), vec![set_of("young", &["172.30.0.201"])]);
    // Same creation time: namespace/name decides.
    let tie = plan(
        &pool(POOL),
        &[lb("y", 1, &["172.30.0.200"]), lb("x", 1, &["172.30.0.200"])],
    );
    assert_eq!(sets(&tie), vec![set_of("y", &["172.30.0.201"])]);
}

#[test]
fn invalid_statuses_are_replaced() {
    let got = plan(
        &pool(POOL),
        &[
            lb("outside", 1, &["10.9.9.9"]),
            lb("two", 2, &["172.30.0.205", "172.30.0.206"]),
            lb("hostname", 3, &["lb.example.com"]),
        ],
    );
    assert_eq!(
        sets(&got),
        vec![
            set_of("outside", &["172.30.0.200"]),
            set_of("two", &["172.30.0.201"]),
            set_of("hostname", &["172.30.0.202"]),
        ]
    );
}

#[test]
fn a_failing_service_with_an_invalid_status_is_cleared_besides_the_warning() {
    let got = plan(
        &pool("10.250.0.10"),
        &[lb("a", 1, &["10.250.0.10"]), lb("b", 2, &["10.9.9.9"])],
    );
    assert_eq!(sets(&got), vec![set_of("b", &[])]);
    assert_eq!(warnings(&got).len(), 1);
}

#[test]
fn services_no_longer_load_balancers_are_cleared_and_other_classes_untouched() {
    let mut cluster_ip = lb("was-lb", 1, &["172.30.0.200"]);
    cluster_ip.wants = Wants::Nothing;
    let mut plain = lb("plain", 1, &[]);
    plain.wants = Wants::Nothing;
    let mut other = lb("other-class", 1, &["172.30.0.201", "10.1.1.1"]);
    other.wants = Wants::NotOurs;
    let got = plan(
        &pool(POOL),
        &[cluster_ip.clone(), plain, other.clone(), lb("new", 2, &[])],
    );
    assert_eq!(
        sets(&got),
        vec![set_of("new", &["172.30.0.201"]), set_of("was-lb", &[])],
        "the address being cleared is not handed out yet; the other class's is not counted"
    );
    assert_eq!(got.in_use, 1);
    cluster_ip.current.clear();
    let waiting = asking(lb("waiting", 3, &[]), "172.30.0.200");
    let cleared = plan(
        &pool(POOL),
        &[cluster_ip, other, lb("new", 2, &["172.30.0.201"]), waiting],
    );
    assert_eq!(sets(&cleared), vec![set_of("waiting", &["172.30.0.200"])]);
}

#[test]
fn an_address_a_service_is_losing_waits_for_its_status_to_be_cleared() {
    let losing = asking(lb("losing", 1, &["172.30.0.200"]), "172.30.0.209");
    let asks = asking(lb("asks", 2, &[]), "172.30.0.200");
    let got = plan(&pool(POOL), &[losing.clone(), asks.clone()]);
    assert_eq!(sets(&got), vec![set_of("losing", &["172.30.0.209"])]);
    assert_eq!(
        warnings(&got),
        vec![warning(
            "asks",
            "spec.loadBalancerIP 172.30.0.200 is used by Service ns/losing"
        )]
    );
    // A Service showing several addresses may be given one of them.
    let two = lb("two", 1, &["172.30.0.200", "172.30.0.201"]);
    let got = plan(&pool("172.30.0.200-172.30.0.201"), &[two]);
    assert_eq!(sets(&got), vec![set_of("two", &["172.30.0.200"])]);
}

fn service(json: serde_json::Value) -> Service {
    serde_json::from_value(json).unwrap()
}

#[test]
fn service_view_reads_type_class_families_request_and_status() {
    let v = ServiceView::from_service(&service(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "3",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"type": "LoadBalancer", "loadBalancerIP": "172.30.0.204",
                 "ipFamilies": ["IPv6", "IPv4"]},
        "status": {"loadBalancer": {"ingress": [{"ip": "172.30.0.204", "ipMode": "VIP"},
                                                {"hostname": "lb.example.com"}]}},
    })));
    assert_eq!(
        v,
        ServiceView {
            namespace: "shop".into(),
            name: "web".into(),
            resource_version: "3".into(),
            created: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            wants: Wants::Address,
            requested: Some("172.30.0.204".into()),
            current: vec!["172.30.0.204".into(), "lb.example.com".into()],
        }
    );
    let wants = |spec: serde_json::Value| {
        ServiceView::from_service(&service(serde_json::json!({
            "metadata": {"name": "s"}, "spec": spec,
        })))
        .wants
    };
    assert_eq!(
        wants(serde_json::json!({"type": "LoadBalancer"})),
        Wants::Address
    );
    assert_eq!(
        wants(serde_json::json!({"type": "ClusterIP"})),
        Wants::Nothing
    );
    assert_eq!(wants(serde_json::json!({})), Wants::Nothing);
    assert_eq!(
        wants(serde_json::json!({"type": "LoadBalancer", "loadBalancerClass": "x.io/lb"})),
        Wants::NotOurs
    );
    assert_eq!(
        wants(serde_json::json!({"type": "LoadBalancer", "ipFamilies": ["IPv6"]})),
        Wants::NotOurs
    );
    let empty_ip = ServiceView::from_service(&service(serde_json::json!({
        "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "loadBalancerIP": ""},
    })));
    assert_eq!(empty_ip.requested, None);
}
