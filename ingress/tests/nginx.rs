//! The whole flow with real parts: keelson-apiserver, kubectl, keelson-ingress and its nginx,
//! and HTTP backends playing the pods (the test writes their EndpointSlices), all in a test host.

mod harness;

use std::collections::BTreeSet;

use harness::{
    backend, expect_warning, ingress, ingress_class, service, slice, slice_with_conditions,
    Backends, Ingress, World, CONTROLLER, DEADLINE,
};
use keelson_testing::{eventually, Component};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Classes, Services and EndpointSlices: web (two pods, named port), api (one pod, port by
/// number), empty (its only pod is not ready).
fn cluster(port: u16) -> String {
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| Backends::ip(i).to_string());
    [
        ingress_class("keelson", CONTROLLER),
        ingress_class("other", "example.com/other-controller"),
        service("web", 80, Some(port)),
        service("api", 8000, Some(port)),
        service("empty", 80, Some(port)),
        web_slice(port, &[a, b]),
        slice("api-1", "api", port, &[c]),
        slice_with_conditions("empty-1", "empty", port, &[(d, "{ready: false}")]),
    ]
    .join("---\n")
}

fn web_slice(port: u16, addresses: &[String]) -> String {
    slice("web-1", "web", port, addresses)
}

fn web_ingress() -> String {
    ingress(
        "web",
        "keelson",
        "web.example.test",
        "",
        &[
            ("/", "web", "{name: http}"),
            ("/api", "api", "{number: 8000}"),
        ],
    )
}

/// An Ingress of class keelson with one rule: `host`, path `/`, to `service` of `cluster`.
fn to_service(name: &str, host: &str, annotations: &str, service: &str) -> String {
    let port = if service == "api" {
        "{number: 8000}"
    } else {
        "{name: http}"
    };
    ingress(name, "keelson", host, annotations, &[("/", service, port)])
}

/// Waits until a backend answers for `host` at `/`.
fn expect_served(ing: &Ingress, what: &str, host: &str) {
    eventually(what, DEADLINE, || backend(ing, host, "/"));
}

/// ingress_nginx_reloads_total from /metrics.
fn reloads(ing: &Ingress) -> u64 {
    let m = ing.metrics();
    let line = m
        .lines()
        .find(|l| l.starts_with("ingress_nginx_reloads_total "));
    let value = line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
    value.unwrap_or_else(|| panic!("no reload counter in /metrics:\n{m}"))
}

fn status(ing: &Ingress, host: &str, path: &str) -> Option<u16> {
    ing.get(host, path).map(|(s, _)| s)
}

fn expect_status(ing: &Ingress, host: &str, path: &str, want: u16) {
    eventually(
        &format!("{want} for {host}{path}"),
        DEADLINE,
        || match status(ing, host, path) {
            Some(s) if s == want => Ok(()),
            other => Err(format!("{other:?}; controller log:\n{}", ing.log())),
        },
    );
}

/// The four backends, an API server, and the Services and EndpointSlices pointing at them.
fn backends_and_api() -> World {
    let world = World::start(&["web-a", "web-b", "api", "not-ready"]);
    world.api.apply(&cluster(world.backends.port));
    world
}

#[test]
fn routes_hosts_and_paths_to_ready_pods() {
    let world = backends_and_api();
    let api = &world.api;
    api.apply(&web_ingress());
    api.apply(&to_service("empty", "empty.example.test", "", "empty"));
    api.apply(&ingress(
        "foreign",
        "other",
        "foreign.example.test",
        "",
        &[("/", "web", "{name: http}")],
    ));
    let mut ing = world.ingress();

    // Both web pods get traffic, with the Host header passed through.
    let mut seen = BTreeSet::new();
    eventually("both web backends", DEADLINE, || {
        seen.insert(backend(&ing, "web.example.test", "/")?);
        if seen.len() == 2 {
            Ok(())
        } else {
            Err(format!("seen {seen:?}; log:\n{}", ing.log()))
        }
    });
    assert_eq!(
        seen,
        BTreeSet::from(["web-a".to_string(), "web-b".to_string()])
    );

    // /api and below go to api; /apix is not under /api, so it falls to the / rule.
    assert_eq!(backend(&ing, "web.example.test", "/api").unwrap(), "api");
    assert_eq!(
        backend(&ing, "web.example.test", "/api/v1/x").unwrap(),
        "api"
    );
    assert!(backend(&ing, "web.example.test", "/apix")
        .unwrap()
        .starts_with("web-"));

    assert_eq!(status(&ing, "unknown.example.test", "/"), Some(404));
    assert_eq!(
        status(&ing, "empty.example.test", "/"),
        Some(503),
        "no ready endpoint"
    );
    assert_eq!(
        status(&ing, "foreign.example.test", "/"),
        Some(404),
        "another controller's class"
    );

    // The ADDRESS column users look at.
    eventually("status.loadBalancer on web", DEADLINE, || {
        let table = api.kubectl_ok(&["get", "ingress", "web"]);
        let row = table.lines().nth(1).unwrap_or("").to_string();
        if row.split_whitespace().any(|c| c == "127.0.0.1") {
            Ok(())
        } else {
            Err(table)
        }
    });
    let foreign = api.kubectl_ok(&["get", "ingress", "foreign", "-o", "jsonpath={.status}"]);
    assert!(
        !foreign.contains("127.0.0.1"),
        "status written on another controller's Ingress: {foreign}"
    );

    let metrics = ing.metrics();
    assert!(metrics.contains("ingress_handled_ingresses 2"), "{metrics}");
    let reloads_before = reloads(&ing);

    // A second Ingress for the same host and path changes nothing nginx sees (the first by
    // namespace/name wins, and its backend's upstream already exists): no reload. Its status
    // shows that the controller has synced it.
    api.apply(&to_service("web-dup", "web.example.test", "", "api"));
    eventually("status.loadBalancer on web-dup", DEADLINE, || {
        let ip = api.kubectl_ok(&[
            "get",
            "ingress",
            "web-dup",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ]);
        (ip == "127.0.0.1").then_some(()).ok_or(ip)
    });
    assert_eq!(
        reloads(&ing),
        reloads_before,
        "nginx reloaded for an unchanged config"
    );
    assert!(backend(&ing, "web.example.test", "/")
        .unwrap()
        .starts_with("web-"));
    api.kubectl_ok(&["delete", "ingress", "web-dup"]);

    // A wildcard host covers one label, as in Kubernetes (nginx's own `*.` would take more).
    api.apply(&to_service("wild", "\"*.wild.example.test\"", "", "api"));
    expect_served(&ing, "a wildcard host served", "a.wild.example.test");
    assert_eq!(status(&ing, "a.b.wild.example.test", "/"), Some(404));

    // The endpointslice controller (this test) drops web-b: it stops getting traffic.
    api.apply(&web_slice(
        world.backends.port,
        &[Backends::ip(0).to_string()],
    ));
    eventually("only web-a after the slice lost web-b", DEADLINE, || {
        let answers: Vec<String> = (0..10)
            .map(|_| backend(&ing, "web.example.test", "/"))
            .collect::<Result<_, _>>()?;
        if answers.iter().all(|a| a == "web-a") {
            Ok(())
        } else {
            Err(format!("{answers:?}"))
        }
    });

    // Later syncs found the status right and left it alone.
    let writes = ing
        .log()
        .lines()
        .filter(|l| l.contains("status written") && l.contains("default/web "))
        .count();
    assert_eq!(
        writes,
        1,
        "status of default/web written {writes} times:\n{}",
        ing.log()
    );

    api.kubectl_ok(&["delete", "ingress", "web"]);
    expect_status(&ing, "web.example.test", "/", 404);

    ing.stop();
    assert_eq!(
        status(&ing, "web.example.test", "/"),
        None,
        "nginx still answers after stop"
    );
}

#[test]
fn an_ingress_nginx_rejects_is_left_out_and_the_others_serve() {
    let world = backends_and_api();
    let api = &world.api;
    api.apply(&web_ingress());
    let ing = world.ingress();
    expect_served(&ing, "web served", "web.example.test");

    // A size of the right form that nginx refuses (it overflows): only nginx -t can tell.
    let size = "nginx.ingress.kubernetes.io/proxy-body-size: \"99999999999999999999999m\"";
    api.apply(&to_service("big", "big.example.test", size, "web"));
    let message = expect_warning(api, "big", "RejectedByNginx");
    assert!(
        message.contains("client_max_body_size") && message.contains("invalid value"),
        "nginx's own words: {message}"
    );
    assert!(!message.contains(".conf"), "no file names: {message}");
    let m = ing.metrics();
    assert!(m.contains("ingress_nginx_reload_errors_total 1"), "{m}");
    assert!(m.contains("ingress_rejected_ingresses 1"), "{m}");
    let log = ing.log();
    assert!(
        log.contains("left out of the nginx configuration") && log.contains("default/big"),
        "{log}"
    );
    assert!(backend(&ing, "web.example.test", "/")
        .unwrap()
        .starts_with("web-"));
    assert_eq!(status(&ing, "big.example.test", "/"), Some(404));

    // A value the checks refuse before rendering: left out too, nginx is not asked.
    let odd = "nginx.ingress.kubernetes.io/proxy-body-size: 12parsecs";
    api.apply(&to_service("odd", "odd.example.test", odd, "web"));
    let message = expect_warning(api, "odd", "BadConfig");
    assert!(message.contains("12parsecs"), "{message}");

    // Fixed: it is served, and no longer counted.
    let fixed = "nginx.ingress.kubernetes.io/proxy-body-size: 12m";
    api.apply(&to_service("big", "big.example.test", fixed, "web"));
    expect_served(&ing, "big served after the fix", "big.example.test");
    eventually("one Ingress left out (odd)", DEADLINE, || {
        let m = ing.metrics();
        m.contains("ingress_rejected_ingresses 1")
            .then_some(())
            .ok_or(m)
    });
    assert!(ing
        .metrics()
        .contains("ingress_nginx_reload_errors_total 1"));
}

#[test]
fn https_with_the_ingress_tls_secret() {
    let world = backends_and_api();
    let api = &world.api;
    let dir = tempfile::Builder::new()
        .prefix("keelson-ingress-test-tls")
        .tempdir()
        .unwrap();
    let key = rcgen::generate_simple_self_signed(vec!["web.example.test".to_string()]).unwrap();
    let (crt, pem) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, key.cert.pem()).unwrap();
    std::fs::write(&pem, key.signing_key.serialize_pem()).unwrap();
    let (crt, pem) = (crt.to_str().unwrap(), pem.to_str().unwrap());
    api.kubectl_ok(&[
        "create", "secret", "tls", "web-tls", "--cert", crt, "--key", pem,
    ]);
    let tls = "  tls:\n  - hosts: [web.example.test]\n    secretName: web-tls\n";
    api.apply(&web_ingress().replace("  rules:\n", &format!("{tls}  rules:\n")));
    let ing = world.ingress();

    // curl checks the served certificate against the one in the Secret.
    let url = format!("https://web.example.test:{}/api", ing.https_port);
    let resolve = format!("web.example.test:{}:127.0.0.1", ing.https_port);
    eventually("the api backend over HTTPS", DEADLINE, || {
        match ing.curl(&[
            "--cacert",
            crt,
            "--resolve",
            &resolve,
            "-H",
            "Host: web.example.test",
            &url,
        ]) {
            Some((200, body)) if body == "backend=api host=web.example.test" => Ok(()),
            other => {
                let verbose = ing
                    .command("curl")
                    .args([
                        "-sSv",
                        "-m",
                        "5",
                        "--cacert",
                        crt,
                        "--resolve",
                        &resolve,
                        &url,
                    ])
                    .output()
                    .unwrap();
                let conf =
                    std::fs::read_to_string(ing.conf_dir().join("nginx.conf")).unwrap_or_default();
                Err(format!(
                    "{other:?}\ncurl: {}\nlog:\n{}\nnginx.conf:\n{conf}",
                    String::from_utf8_lossy(&verbose.stderr),
                    ing.log()
                ))
            }
        }
    });
    // A name with no certificate gets no TLS session (not some other host's certificate).
    let unknown = format!("https://unknown.example.test:{}/", ing.https_port);
    let resolve_unknown = format!("unknown.example.test:{}:127.0.0.1", ing.https_port);
    assert_eq!(
        ing.curl(&["-k", "--resolve", &resolve_unknown, &unknown]),
        None
    );

    // Plain HTTP is redirected to HTTPS, on the HTTPS port.
    let http = format!("http://127.0.0.1:{}/api?x=1", ing.http_port);
    // -D - puts the response headers where the body would be.
    let (code, headers) = ing
        .curl(&[
            "-H",
            "Host: web.example.test",
            "-D",
            "-",
            "-o",
            "/dev/null",
            &http,
        ])
        .unwrap();
    let want = format!(
        "Location: https://web.example.test:{}/api?x=1\r\n",
        ing.https_port
    );
    assert_eq!(code, 308, "{headers}");
    assert!(headers.contains(&want), "{headers}");
}

#[test]
fn nginx_killed_is_started_again() {
    let world = backends_and_api();
    let api = &world.api;
    api.apply(&web_ingress());
    let ing = world.ingress();
    expect_served(&ing, "web served", "web.example.test");
    eventually("the controller saw nginx start", DEADLINE, || {
        let m = ing.metrics();
        m.contains("ingress_nginx_reloads_total 1")
            .then_some(())
            .ok_or(m)
    });
    let pid_file = ing.conf_dir().join("nginx.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let workers = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    // The controller notices at its next sync (any change, or every 10 s) and starts nginx
    // again with the config it had.
    eventually("web served by a new nginx", DEADLINE, || {
        let now = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if now.trim() == pid.to_string() {
            return Err("same nginx pid".into());
        }
        backend(&ing, "web.example.test", "/")
    });
    // The dead master's workers were stopped too: none keeps serving an old config.
    for w in workers.split_whitespace() {
        let w: i32 = w.parse().unwrap();
        eventually("orphaned worker gone", DEADLINE, || {
            match kill(Pid::from_raw(w), None) {
                Err(_) => Ok(()),
                Ok(()) => Err(format!("worker {w} still runs")),
            }
        });
    }
    assert!(
        ing.log()
            .contains("nginx is not running; starting it again"),
        "{}",
        ing.log()
    );
}

#[test]
fn sigterm_while_the_api_server_is_unreachable_exits_cleanly() {
    let world = World::start(&[]);
    let api = &world.api;
    // The same credentials, aimed at a port where nothing listens.
    let own = api.kubeconfig_of(Component::Ingress);
    let kubeconfig = std::fs::read_to_string(own).unwrap().replace(
        &format!("{}:{}", api.address, api.port),
        &format!("{}:{}", api.address, api.port + 1),
    );
    let path = api.dir.path().join("unreachable.kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let mut ing = Ingress::start(&world.host, &path);
    eventually("a failed watch logged", DEADLINE, || {
        let log = ing.log();
        log.contains("watch failed").then_some(()).ok_or(log)
    });
    ing.stop();
}
