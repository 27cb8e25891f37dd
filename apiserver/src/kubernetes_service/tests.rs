use super::*;

fn addrs(list: &[&str]) -> Vec<SocketAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn every_server_on_one_port_is_one_subset_in_address_order() {
    let servers = addrs(&["10.0.0.2:6443", "10.0.0.1:6443"]);
    let ep = endpoints(&servers);
    assert_eq!(
        ep["subsets"],
        json!([{ "addresses": [{ "ip": "10.0.0.1" }, { "ip": "10.0.0.2" }],
                 "ports": [{ "name": "https", "port": 6443, "protocol": "TCP" }] }])
    );
    let slice = endpoint_slice(&servers);
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(slice["endpoints"].as_array().unwrap().len(), 2);
    assert_eq!(slice["ports"][0]["port"], 6443);
    // The order servers are seen in does not matter: every server writes the same.
    assert_eq!(endpoints(&addrs(&["10.0.0.1:6443", "10.0.0.2:6443"])), ep);
}

#[test]
fn servers_on_other_ports_get_a_subset_each_and_the_slice_the_lowest_port() {
    let ep = endpoints(&addrs(&["10.0.0.1:7443", "10.0.0.2:6443"]));
    let ports: Vec<&Value> = ep["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["ports"][0]["port"])
        .collect();
    assert_eq!(ports, [&json!(6443), &json!(7443)]);
    let slice = endpoint_slice(&addrs(&["10.0.0.1:7443", "10.0.0.2:6443"]));
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.0.0.2"]));
}

#[test]
fn no_servers_empty_the_lists() {
    assert_eq!(endpoints(&[])["subsets"], json!([]));
    assert_eq!(endpoint_slice(&[])["endpoints"], json!([]));
}
