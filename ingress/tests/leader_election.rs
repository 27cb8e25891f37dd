//! Two keelson-ingress replicas in one test host: both serve traffic through their own nginx,
//! only the one holding the Lease writes Ingress status. A clean stop hands the Lease over at
//! once; a replica whose Lease is taken stops writing status at once and serves on.

mod harness;

use std::time::Duration;

use harness::{
    backend, ingress, ingress_class, service, slice, Backends, Ingress, World, CONTROLLER, DEADLINE,
};
use keelson_testing::{eventually, Component};

/// A lease far longer than the test: every takeover here is by release, none by expiry.
const FLAGS: &[&str] = &[
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=500ms",
];

fn web(port: u16) -> String {
    [
        ingress_class("keelson", CONTROLLER),
        service("web", 80, Some(port)),
        slice("web-1", "web", port, &[Backends::ip(0).to_string()]),
        ingress(
            "web",
            "keelson",
            "web.example.test",
            "",
            &[("/", "web", "{name: http}")],
        ),
    ]
    .join("---\n")
}

fn address(world: &World) -> String {
    world.api.kubectl_ok(&[
        "get",
        "ingress",
        "web",
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0].ip}",
    ])
}

fn wait_address(world: &World, want: &str, who: &Ingress) {
    eventually(&format!("status naming {want}"), DEADLINE, || {
        let got = address(world);
        (got == want)
            .then_some(())
            .ok_or_else(|| format!("{got:?}; log:\n{}", who.log()))
    });
}

fn leading(ing: &Ingress) -> bool {
    ing.metrics()
        .contains("leader_election_master_status{name=\"keelson-ingress\"} 1")
}

#[test]
fn only_the_lease_holder_writes_ingress_status() {
    let world = World::start(&["web"]);
    world.api.apply(&web(world.backends.port));
    let kubeconfig = world.api.kubeconfig_of(Component::Ingress);
    let mut a = Ingress::replica(&world.host, &kubeconfig, 0, "10.250.1.1", FLAGS);
    wait_address(&world, "10.250.1.1", &a);
    let b = Ingress::replica(&world.host, &kubeconfig, 1, "10.250.1.2", FLAGS);

    // The standby routes too (its nginx has synced), and has written nothing.
    eventually("the standby serving", DEADLINE, || {
        backend(&b, "web.example.test", "/")
    });
    assert!(!leading(&b), "{}", b.metrics());
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(address(&world), "10.250.1.1");
    assert!(!b.log().contains("status written"), "{}", b.log());

    // A clean stop releases the Lease: the standby leads and writes at once, not in 60 s.
    a.stop();
    wait_address(&world, "10.250.1.2", &b);
    assert!(leading(&b), "{}", b.metrics());

    // Someone else takes the Lease: b stops writing (an edited status stays) and serves on.
    world.api.kubectl_ok(&[
        "patch",
        "lease",
        "keelson-ingress",
        "-n",
        "kube-system",
        "--type=merge",
        "-p",
        r#"{"spec":{"holderIdentity":"intruder"}}"#,
    ]);
    eventually("b to stand by", Duration::from_secs(5), || {
        (!leading(&b)).then_some(()).ok_or_else(|| b.log())
    });
    assert!(b.log().contains("leaderelection lost"), "{}", b.log());
    world.api.kubectl_ok(&[
        "patch",
        "ingress",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"10.9.9.9"}]}}}"#,
    ]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(address(&world), "10.9.9.9", "{}", b.log());
    assert_eq!(backend(&b, "web.example.test", "/").unwrap(), "web");
}
