//! One bad Ingress among ten, with the real nginx: the other nine are served and follow
//! endpoint changes, the bad one gets a Warning Event, and fixing it brings it in.

mod harness;

use harness::{
    backend, expect_warning, ingress, ingress_class, service, slice, Backends, World, CONTROLLER,
    DEADLINE,
};
use keelson_testing::{eventually, Apiserver};

const BAD: usize = 6;

fn host(i: usize) -> String {
    format!("app-{i}.example.test")
}

/// Even apps go to web (web-a), odd ones to api.
fn cluster(port: u16) -> String {
    let ip = |i| Backends::ip(i).to_string();
    let mut docs = vec![
        ingress_class("keelson", CONTROLLER),
        service("web", 80, None),
        service("api", 80, None),
        slice("web-1", "web", port, &[ip(0)]),
        slice("api-1", "api", port, &[ip(2)]),
    ];
    for i in 0..10 {
        let svc = if i % 2 == 0 { "web" } else { "api" };
        let mut doc = ingress(
            &format!("app-{i}"),
            "keelson",
            &host(i),
            "nginx.ingress.kubernetes.io/ssl-redirect: \"false\"",
            &[("/", svc, "{name: http}")],
        );
        if i == BAD {
            let tls = format!(
                "  tls:\n  - hosts: [{}]\n    secretName: app-tls\n",
                host(i)
            );
            doc = doc.replace("  rules:\n", &format!("{tls}  rules:\n"));
        }
        docs.push(doc);
    }
    docs.join("---\n")
}

/// A kubernetes.io/tls Secret whose PEM blocks hold no certificate or key (kubectl's `create
/// secret tls` would check them; a generic Secret of that type is not checked).
fn garbage_tls_secret(api: &Apiserver, dir: &std::path::Path) {
    let (crt, key) = (dir.join("garbage.crt"), dir.join("garbage.key"));
    std::fs::write(
        &crt,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    api.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "app-tls",
        "--type=kubernetes.io/tls",
        &format!("--from-file=tls.crt={}", crt.display()),
        &format!("--from-file=tls.key={}", key.display()),
    ]);
}

fn good_tls_secret(api: &Apiserver, dir: &std::path::Path) -> std::path::PathBuf {
    let key = rcgen::generate_simple_self_signed(vec![host(BAD)]).unwrap();
    let (crt, pem) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&crt, key.cert.pem()).unwrap();
    std::fs::write(&pem, key.signing_key.serialize_pem()).unwrap();
    api.kubectl_ok(&["delete", "secret", "app-tls"]);
    api.kubectl_ok(&[
        "create",
        "secret",
        "tls",
        "app-tls",
        "--cert",
        crt.to_str().unwrap(),
        "--key",
        pem.to_str().unwrap(),
    ]);
    crt
}

fn lb_ip(api: &Apiserver, name: &str) -> String {
    api.kubectl_ok(&[
        "get",
        "ingress",
        name,
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0].ip}",
    ])
}

#[test]
fn one_bad_ingress_among_ten_leaves_the_nine_serving_and_following_endpoints() {
    let world = World::start(&["web-a", "web-b", "api"]);
    let (api, backends) = (&world.api, &world.backends);
    let dir = tempfile::tempdir().unwrap();
    garbage_tls_secret(api, dir.path());
    api.apply(&cluster(backends.port));
    let ing = world.ingress();

    // The nine are served; the tenth is not (its Host meets the default server).
    for i in (0..10).filter(|i| *i != BAD) {
        let want = if i % 2 == 0 { "web-a" } else { "api" };
        eventually(&format!("{} served", host(i)), DEADLINE, || {
            let got = backend(&ing, &host(i), "/")?;
            (got == want)
                .then_some(())
                .ok_or_else(|| format!("{got}; log:\n{}", ing.log()))
        });
    }
    assert_eq!(ing.get(&host(BAD), "/").map(|(s, _)| s), Some(404));
    let message = expect_warning(api, "app-6", "RejectedByNginx");
    assert!(message.contains("certificate"), "{message}");
    // ingress-nginx's Sync Event on a served Ingress, in what kubectl describe shows.
    eventually("Sync on app-0", DEADLINE, || {
        let out = api.kubectl_ok(&["describe", "ingress", "app-0"]);
        let seen = out.contains("Sync") && out.contains("Scheduled for sync");
        seen.then_some(()).ok_or(out)
    });
    let m = ing.metrics();
    assert!(m.contains("ingress_rejected_ingresses 1"), "{m}");
    assert!(m.contains("ingress_handled_ingresses 9"), "{m}");
    eventually("status on a served Ingress", DEADLINE, || {
        let ip = lb_ip(api, "app-0");
        (ip == "127.0.0.1").then_some(()).ok_or(ip)
    });
    assert_eq!(lb_ip(api, "app-6"), "", "no address on a left-out Ingress");

    // The endpointslice controller (this test) moves web from web-a to web-b: followed.
    api.apply(&slice(
        "web-1",
        "web",
        backends.port,
        &[Backends::ip(1).to_string()],
    ));
    eventually("app-0 follows web to web-b", DEADLINE, || {
        let got = backend(&ing, &host(0), "/")?;
        (got == "web-b").then_some(()).ok_or(got)
    });
    assert_eq!(backend(&ing, &host(1), "/").unwrap(), "api");

    // A real certificate in the Secret brings the tenth in, over HTTP and HTTPS.
    let crt = good_tls_secret(api, dir.path());
    eventually("app-6 served after the fix", DEADLINE, || {
        let got = backend(&ing, &host(BAD), "/")?;
        (got == "web-b").then_some(()).ok_or(got)
    });
    let url = format!("https://{}:{}/", host(BAD), ing.https_port);
    let resolve = format!("{}:{}:127.0.0.1", host(BAD), ing.https_port);
    let https = ing.curl(&[
        "--cacert",
        crt.to_str().unwrap(),
        "--resolve",
        &resolve,
        &url,
    ]);
    assert_eq!(
        https,
        Some((200, format!("backend=web-b host={}", host(BAD))))
    );
    eventually("nothing left out", DEADLINE, || {
        let m = ing.metrics();
        m.contains("ingress_rejected_ingresses 0")
            .then_some(())
            .ok_or(m)
    });
    assert_eq!(backend(&ing, &host(0), "/").unwrap(), "web-b");
}
