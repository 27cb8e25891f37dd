//! Endpoints going away, with real parts (keelson-apiserver, kubectl, keelson-ingress and its
//! nginx, HTTP backends playing the pods) in a test host: a terminating endpoint gets no new
//! request from the moment the controller has seen it, and an endpoint whose pod is gone
//! (connection refused) costs a retry on another, never a failed request.

mod harness;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use harness::{
    backend, ingress, ingress_class, service, slice_with_conditions, Backends, Ingress, World,
    CONTROLLER, DEADLINE,
};
use keelson_testing::{eventually, require_root_and_tools};

const HOST: &str = "web.example.test";

/// Class `keelson`, Service web, its EndpointSlice (`(address, conditions as YAML)`) and an
/// Ingress for it with `annotations` (YAML mapping entries).
fn cluster(port: u16, endpoints: &[(String, &str)], annotations: &str) -> String {
    [
        ingress_class("keelson", CONTROLLER),
        service("web", 80, Some(port)),
        web_slice(port, endpoints),
        ingress(
            "web",
            "keelson",
            HOST,
            annotations,
            &[("/", "web", "{name: http}")],
        ),
    ]
    .join("---\n")
}

fn web_slice(port: u16, endpoints: &[(String, &str)]) -> String {
    slice_with_conditions("web-1", "web", port, endpoints)
}

fn nginx_conf(ing: &Ingress) -> String {
    std::fs::read_to_string(ing.conf_dir().join("nginx.conf")).unwrap_or_default()
}

/// Who answered each of `n` requests (an error names what went wrong instead).
fn answers(ing: &Ingress, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| backend(ing, HOST, "/").unwrap_or_else(|e| format!("failed: {e}")))
        .collect()
}

#[test]
fn terminating_endpoints_get_no_new_request() {
    let world = World::start(&["web-a", "web-b", "web-c"]);
    let port = world.backends.port;
    let [a, b, c] = [0, 1, 2].map(|i| Backends::ip(i).to_string());
    let ready = "{ready: true, serving: true, terminating: false}";
    let all_ready = [(a.clone(), ready), (b.clone(), ready), (c.clone(), ready)];
    world.api.apply(&cluster(port, &all_ready, ""));
    let ing = world.ingress();
    let mut seen = BTreeSet::new();
    eventually("all three pods answer", DEADLINE, || {
        seen.insert(backend(&ing, HOST, "/")?);
        (seen.len() == 3)
            .then_some(())
            .ok_or_else(|| format!("seen {seen:?}; log:\n{}", ing.log()))
    });

    // b and c are deleted but still answer (their preStop runs): b as the endpointslice
    // controller writes it, c from a writer that leaves `ready` unset. Both keep listening, so
    // any request nginx still sends them would succeed and show up here.
    let going = [
        (a.clone(), ready),
        (
            b.clone(),
            "{ready: false, serving: true, terminating: true}",
        ),
        (c.clone(), "{serving: true, terminating: true}"),
    ];
    world.api.apply(&web_slice(port, &going));
    eventually("b and c out of nginx.conf", DEADLINE, || {
        let conf = nginx_conf(&ing);
        let listed = |ip: &str| conf.contains(&format!("server {ip}:{port};"));
        (listed(&a) && !listed(&b) && !listed(&c))
            .then_some(())
            .ok_or_else(|| conf.clone())
    });
    // Once nginx has taken the new text (a SIGHUP, handled a moment after the rename), only a
    // answers; with b and c still in, round-robin would give them most of any ten in a row.
    eventually("ten answers in a row from web-a", DEADLINE, || {
        let got = answers(&ing, 10);
        got.iter()
            .all(|w| w == "web-a")
            .then_some(())
            .ok_or(format!("{got:?}"))
    });
    let got = answers(&ing, 30);
    assert!(
        got.iter().all(|w| w == "web-a"),
        "a terminating pod got a request: {got:?}"
    );
}

#[test]
fn a_refused_endpoint_costs_no_request() {
    let world = World::start(&["web-a"]);
    let port = world.backends.port;
    let a = Backends::ip(0).to_string();
    // An address of the host where nothing listens: connecting is refused at once, as for a
    // pod killed before its endpoint left the slice.
    let gone = "10.250.0.99";
    world
        .host
        .ip(&["addr", "add", &format!("{gone}/32"), "dev", "lo"]);
    let ready = "{ready: true}";
    world.api.apply(&cluster(
        port,
        &[(a.clone(), ready), (gone.to_string(), ready)],
        "",
    ));
    let ing = world.ingress();
    wait_for_servers(&ing, port, &[&a, gone]);

    let got = answers(&ing, 40);
    assert!(got.iter().all(|w| w == "web-a"), "{got:?}");
    // A POST is retried too: a refused connection means nothing was sent.
    for i in 0..10 {
        let url = format!("http://127.0.0.1:{}/orders", ing.http_port);
        let host = format!("Host: {HOST}");
        let answer = ing.curl(&["-X", "POST", "-d", "x=1", "-H", &host, &url]);
        assert!(
            matches!(&answer, Some((200, body)) if body.starts_with("backend=web-a")),
            "POST {i}: {answer:?}"
        );
    }
    // The dead endpoint was really tried (each worker tries it, then leaves it alone for
    // nginx's fail_timeout), so the answers above came from retries, not from luck.
    let errors = std::fs::read_to_string(ing.conf_dir().join("logs/error.log")).unwrap_or_default();
    assert!(
        errors.contains("Connection refused") && errors.contains(gone),
        "nginx never tried {gone}; error.log:\n{errors}"
    );
}

#[test]
fn a_silent_endpoint_costs_a_connect_timeout_not_a_request() {
    require_root_and_tools(&["nft"]);
    let world = World::start(&["web-a"]);
    let port = world.backends.port;
    let a = Backends::ip(0).to_string();
    // An address whose packets vanish (a node gone off the network): connecting never
    // completes, so only proxy_connect_timeout ends the attempt. The rule dies with the host.
    let silent = "10.250.0.98";
    world
        .host
        .ip(&["addr", "add", &format!("{silent}/32"), "dev", "lo"]);
    world.host.sh_ok(&format!(
        "nft -f - <<'EOF'\ntable inet silent {{\n  chain out {{\n    type filter hook output priority 0;\n    ip daddr {silent} drop\n  }}\n}}\nEOF"
    ));
    let ready = "{ready: true}";
    // 1 s instead of the default 5 s, through ingress-nginx's annotation.
    world.api.apply(&cluster(
        port,
        &[(a.clone(), ready), (silent.to_string(), ready)],
        r#"nginx.ingress.kubernetes.io/proxy-connect-timeout: "1""#,
    ));
    let ing = world.ingress();
    wait_for_servers(&ing, port, &[&a, silent]);
    assert!(
        nginx_conf(&ing).contains("proxy_connect_timeout 1s;"),
        "{}",
        nginx_conf(&ing)
    );

    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let start = Instant::now();
        let who = backend(&ing, HOST, "/");
        slowest = slowest.max(start.elapsed());
        assert_eq!(who.as_deref(), Ok("web-a"));
    }
    // One connect timeout at most per request (then nginx leaves the endpoint alone for a
    // while): far from the 5 s default, which the annotation replaced.
    assert!(
        slowest < Duration::from_secs(4),
        "slowest answer {slowest:?}"
    );
    let errors = std::fs::read_to_string(ing.conf_dir().join("logs/error.log")).unwrap_or_default();
    assert!(
        errors.contains("timed out") && errors.contains(silent),
        "nginx never tried {silent}; error.log:\n{errors}"
    );
}

/// Waits until nginx.conf lists every one of `ips` on `port` and nginx answers. The file is in
/// place a moment before a first nginx listens; the question goes to an unknown host (404 from
/// the default server), so no endpoint is tried before the test's own requests.
fn wait_for_servers(ing: &Ingress, port: u16, ips: &[&str]) {
    eventually("the endpoints in nginx.conf, served", DEADLINE, || {
        let conf = nginx_conf(ing);
        let all = ips
            .iter()
            .all(|ip| conf.contains(&format!("server {ip}:{port};")));
        let answers = ing.get("unknown.example.test", "/").map(|(s, _)| s);
        (all && answers == Some(404))
            .then_some(())
            .ok_or_else(|| format!("{answers:?}\n{conf}\nlog:\n{}", ing.log()))
    });
}
