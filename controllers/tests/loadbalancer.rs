//! Load-balancer IP allocation against a real keelson-apiserver: the controller manager with
//! --load-balancer-ip-range gives Services of type LoadBalancer created with kubectl their
//! addresses (shown as EXTERNAL-IP), says with an Event when it cannot, hands a freed address to
//! the Service waiting for one, and clears the status of a Service that stops being one.

use std::time::Duration;

use keelson_testing::{eventually, Apiserver, Daemon};

const RANGE: &str = "10.250.0.10-10.250.0.11";

struct Cluster {
    api: Apiserver,
    cm: Daemon,
}

impl Cluster {
    fn start() -> Cluster {
        let api = Apiserver::start();
        let cm = Daemon::controller_manager(&api, &["--load-balancer-ip-range", RANGE]);
        Cluster { api, cm }
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.api
            .kubectl_cmd()
            .run(args)
            .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.cm.log()))
    }

    fn create_lb(&self, name: &str) {
        self.kubectl(&["create", "service", "loadbalancer", name, "--tcp=80"]);
    }

    /// status.loadBalancer.ingress[0].ip, empty while there is none.
    fn ingress_ip(&self, name: &str) -> String {
        self.kubectl(&[
            "get",
            "svc",
            name,
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ])
    }

    fn wait_ip(&self, name: &str, want: &str) {
        eventually(
            &format!("{name} to show {want:?}"),
            Duration::from_secs(10),
            || {
                let got = self.ingress_ip(name);
                (got == want)
                    .then_some(())
                    .ok_or_else(|| format!("{name} shows {got:?}\n{}", self.cm.log()))
            },
        )
    }

    /// The Warning AllocationFailed Event about `name`, once there is one.
    fn wait_warning(&self, name: &str) -> String {
        let selector = format!("involvedObject.name={name}");
        eventually(
            &format!("a warning about {name}"),
            Duration::from_secs(10),
            || {
                let events = self.kubectl(&[
                    "get",
                    "events",
                    "--field-selector",
                    &selector,
                    "-o",
                    "jsonpath={range .items[*]}{.type}/{.reason}: {.message}{\"\\n\"}{end}",
                ]);
                events
                    .lines()
                    .find(|l| l.starts_with("Warning/AllocationFailed: "))
                    .map(String::from)
                    .ok_or_else(|| format!("events of {name}: {events:?}\n{}", self.cm.log()))
            },
        )
    }
}

#[test]
fn services_get_pool_addresses_wait_for_a_free_one_and_give_it_back() {
    let c = Cluster::start();
    c.create_lb("a");
    c.wait_ip("a", "10.250.0.10");
    c.create_lb("b");
    c.wait_ip("b", "10.250.0.11");
    let table = c.kubectl(&["get", "svc", "a", "b"]);
    assert!(table.contains("EXTERNAL-IP"), "{table}");
    for (name, ip) in [("a", "10.250.0.10"), ("b", "10.250.0.11")] {
        let row = table.lines().find(|l| l.starts_with(name)).unwrap_or("");
        assert!(row.contains(ip), "{name} shows {ip}: {table}");
    }
    let mode = c.kubectl(&[
        "get",
        "svc",
        "a",
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0].ipMode}",
    ]);
    assert_eq!(mode, "VIP");

    // The pool is used up: c waits, and says why.
    c.create_lb("c");
    let full = c.wait_warning("c");
    assert!(
        full.contains("no address left in the pool 10.250.0.10-10.250.0.11 (2 in use)"),
        "{full}"
    );
    assert_eq!(c.ingress_ip("c"), "");
    let pending = c.kubectl(&["get", "svc", "c"]);
    assert!(pending.contains("<pending>"), "{pending}");

    c.kubectl(&["delete", "svc", "a"]);
    c.wait_ip("c", "10.250.0.10");
    let allocated = c.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=c,reason=IPAllocated",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        allocated.contains("Assigned IP [\"10.250.0.10\"]"),
        "{allocated}"
    );

    // spec.loadBalancerIP asks for b's address.
    c.api.apply(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: d\n  namespace: default\nspec:\n  type: LoadBalancer\n  loadBalancerIP: 10.250.0.11\n  ports:\n  - port: 80\n",
    );
    let taken = c.wait_warning("d");
    assert!(
        taken.contains("spec.loadBalancerIP 10.250.0.11 is used by Service default/b"),
        "{taken}"
    );
    assert_eq!(c.ingress_ip("d"), "");

    // b stops being a LoadBalancer: its status is cleared, and d gets the address it asked for.
    // The type alone is patched: the node ports the change leaves untouched are dropped, as
    // upstream does.
    c.kubectl(&[
        "patch",
        "svc",
        "b",
        "--type=merge",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ]);
    c.wait_ip("b", "");
    let status = c.kubectl(&["get", "svc", "b", "-o", "jsonpath={.status.loadBalancer}"]);
    assert!(matches!(status.as_str(), "" | "{}"), "{status}");
    c.wait_ip("d", "10.250.0.11");
    assert_eq!(c.ingress_ip("c"), "10.250.0.10");
    eventually("metrics of 2 addresses", Duration::from_secs(10), || {
        let got = (
            c.cm.metric("keelson_loadbalancer_ips_in_use "),
            c.cm.metric("keelson_loadbalancer_ip_allocations_total "),
        );
        (got == (Some(2.0), Some(4.0)))
            .then_some(())
            .ok_or(format!("in use, allocations: {got:?}"))
    });
}
