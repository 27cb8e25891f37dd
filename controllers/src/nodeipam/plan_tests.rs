use super::*;

fn set(cluster: &str, mask: u8) -> Allocator {
    Allocator::new(CidrSet::new(cluster.parse().unwrap(), mask).unwrap())
}

fn node(name: &str, cidrs: &[&str]) -> NodeView {
    NodeView {
        name: name.into(),
        uid: format!("uid-{name}"),
        resource_version: "7".into(),
        created: None,
        pod_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
        deleting: false,
    }
}

fn assigned(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Assign { node, cidr, .. } => Some((node.clone(), cidr.to_string())),
            Action::Warn { .. } => None,
        })
        .collect()
}

fn warnings(actions: &[Action]) -> Vec<(String, &'static str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Warn { node, reason, .. } => Some((node.clone(), *reason)),
            Action::Assign { .. } => None,
        })
        .collect()
}

fn pair(n: &str, c: &str) -> (String, String) {
    (n.to_string(), c.to_string())
}

#[test]
fn nodes_without_a_cidr_get_distinct_free_blocks() {
    let mut a = set("10.244.0.0/16", 24);
    let nodes = [
        node("a", &["10.244.0.0/24"]),
        node("b", &[]),
        node("c", &[]),
    ];
    let got = a.plan(&nodes);
    assert_eq!(
        assigned(&got),
        vec![pair("b", "10.244.1.0/24"), pair("c", "10.244.2.0/24")]
    );
    assert!(matches!(&got[0], Action::Assign { resource_version, .. } if resource_version == "7"));
    assert_eq!(a.usage(), (3, 256));
}

#[test]
fn a_fresh_allocator_rebuilds_the_used_set_from_the_nodes() {
    // What a restarted controller manager sees: CIDRs scattered through the range.
    let mut a = set("10.244.0.0/16", 24);
    let nodes = [
        node("a", &["10.244.0.0/24"]),
        node("b", &["10.244.1.0/24"]),
        node("c", &["10.244.3.0/24"]),
        node("d", &[]),
        node("e", &[]),
    ];
    assert_eq!(
        assigned(&a.plan(&nodes)),
        vec![pair("d", "10.244.2.0/24"), pair("e", "10.244.4.0/24")]
    );
}

#[test]
fn a_written_cidr_stays_used_until_the_node_shows_it() {
    let mut a = set("10.244.0.0/16", 24);
    let first = a.plan(&[node("a", &[])]);
    assert_eq!(assigned(&first), vec![pair("a", "10.244.0.0/24")]);
    a.assigned("a", "uid-a", "10.244.0.0/24".parse().unwrap());
    // The watch has not delivered a's update yet; b arrives: a is not planned again, and b
    // does not get a's block.
    let second = a.plan(&[node("a", &[]), node("b", &[])]);
    assert_eq!(assigned(&second), vec![pair("b", "10.244.1.0/24")]);
}

#[test]
fn a_failed_write_is_planned_again() {
    let mut a = set("10.244.0.0/16", 24);
    assert_eq!(assigned(&a.plan(&[node("a", &[])])).len(), 1);
    // No `assigned` call: the patch failed (conflict); the next plan tries again.
    assert_eq!(assigned(&a.plan(&[node("a", &[])])).len(), 1);
}

#[test]
fn deleted_nodes_free_their_block_and_the_cursor_moves_on_before_reusing_it() {
    let mut a = set("10.244.0.0/22", 24);
    let mut nodes = vec![node("a", &[]), node("b", &[])];
    assert_eq!(
        assigned(&a.plan(&nodes)),
        vec![pair("a", "10.244.0.0/24"), pair("b", "10.244.1.0/24")]
    );
    nodes = vec![node("b", &["10.244.1.0/24"]), node("c", &[])];
    assert_eq!(
        assigned(&a.plan(&nodes)),
        vec![pair("c", "10.244.2.0/24")],
        "round robin, as upstream: a's block is not the next one"
    );
    nodes = vec![
        node("b", &["10.244.1.0/24"]),
        node("c", &["10.244.2.0/24"]),
        node("d", &[]),
        node("e", &[]),
    ];
    assert_eq!(
        assigned(&a.plan(&nodes)),
        vec![pair("d", "10.244.3.0/24"), pair("e", "10.244.0.0/24")],
        "the cursor wraps to the freed block"
    );
}

#[test]
fn a_full_range_warns_once_per_node_and_allocates_when_a_block_frees() {
    let mut a = set("10.244.0.0/23", 24);
    let full = [
        node("a", &["10.244.0.0/24"]),
        node("b", &["10.244.1.0/24"]),
        node("c", &[]),
    ];
    let got = a.plan(&full);
    assert_eq!(warnings(&got), vec![("c".to_string(), CIDR_NOT_AVAILABLE)]);
    assert!(matches!(&got[0], Action::Warn { message, .. }
        if message == "no pod CIDR left for Node c: all 2 blocks of --cluster-cidr 10.244.0.0/23 are in use"));
    assert!(a.plan(&full).is_empty(), "the same warning is not repeated");
    let freed = [node("b", &["10.244.1.0/24"]), node("c", &[])];
    assert_eq!(assigned(&a.plan(&freed)), vec![pair("c", "10.244.0.0/24")]);
}

#[test]
fn cidrs_outside_the_range_are_left_alone_with_a_warning() {
    let mut a = set("10.244.0.0/16", 24);
    let nodes = [node("x", &["192.168.7.0/24"]), node("y", &[])];
    let got = a.plan(&nodes);
    assert_eq!(
        warnings(&got),
        vec![("x".to_string(), POD_CIDR_OUT_OF_RANGE)]
    );
    assert_eq!(assigned(&got), vec![pair("y", "10.244.0.0/24")]);
    assert!(a.plan(&nodes[..1]).is_empty(), "warned once");
}

#[test]
fn the_later_of_two_colliding_nodes_is_warned_and_both_keep_their_cidr() {
    let mut a = set("10.244.0.0/16", 24);
    let mut old = node("old", &["10.244.4.0/24"]);
    old.created = Some("2026-01-01T00:00:00Z".parse().unwrap());
    let mut new = node("new", &["10.244.4.0/23"]);
    new.created = Some("2026-02-01T00:00:00Z".parse().unwrap());
    let got = a.plan(&[new, old, node("z", &[])]);
    assert_eq!(
        warnings(&got),
        vec![("new".to_string(), POD_CIDR_COLLISION)]
    );
    assert_eq!(
        assigned(&got),
        vec![pair("z", "10.244.0.0/24")],
        "blocks 4 and 5 stay used by the two nodes"
    );
    assert_eq!(a.usage(), (3, 256));
}

#[test]
fn the_other_family_of_a_dual_stack_node_is_not_this_allocators() {
    let mut a = set("10.244.0.0/16", 24);
    let got = a.plan(&[node("d", &["10.244.0.0/24", "fd00::/64"])]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn nodes_being_deleted_get_nothing() {
    let mut a = set("10.244.0.0/16", 24);
    let mut gone = node("gone", &[]);
    gone.deleting = true;
    assert!(a.plan(&[gone]).is_empty());
}

#[test]
fn node_view_takes_pod_cidrs_then_pod_cidr() {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "uid": "u", "resourceVersion": "3"},
        "spec": {"podCIDR": "10.244.1.0/24"},
    }))
    .unwrap();
    let v = NodeView::from_node(&node);
    assert_eq!(v.pod_cidrs, vec!["10.244.1.0/24".to_string()]);
    assert_eq!((v.uid.as_str(), v.resource_version.as_str()), ("u", "3"));
    let bare: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "n2"}})).unwrap();
    assert!(NodeView::from_node(&bare).pod_cidrs.is_empty());
}
