//! ClusterIP and NodePort allocation: distinct under concurrency, checked when asked for,
//! kept across restarts and released on delete.

use k8s_openapi::api::core::v1::Service;
use keelson_testing::Apiserver;
use kube::api::{Api, DeleteParams, PostParams};
use std::collections::HashSet;

fn svc(name: &str, ip: Option<&str>, node_port: bool) -> Service {
    let mut spec = serde_json::json!({ "selector": { "app": name }, "ports": [{ "port": 80 }] });
    if let Some(ip) = ip {
        spec["clusterIP"] = ip.into();
    }
    if node_port {
        spec["type"] = "NodePort".into();
    }
    serde_json::from_value(serde_json::json!({ "metadata": { "name": name }, "spec": spec }))
        .unwrap()
}

fn err_message(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("unexpected error {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ips_are_unique_even_when_created_concurrently() {
    // A /26 leaves 62 addresses: the first is the `kubernetes` Service's, 59 go to Services
    // created at once, so collisions would be likely if unchecked.
    let mut server = Apiserver::start_with(&["--service-cluster-ip-range", "10.96.0.0/26"]);
    let api: Api<Service> = Api::namespaced(server.client().await, "default");
    let tasks: Vec<_> = (0..59)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                api.create(
                    &PostParams::default(),
                    &svc(&format!("s{i}"), None, i % 2 == 0),
                )
                .await
            })
        })
        .collect();
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for t in tasks {
        let s = t.await.unwrap().unwrap();
        let spec = s.spec.unwrap();
        assert!(ips.insert(spec.cluster_ip.unwrap()), "duplicate ClusterIP");
        if let Some(p) = spec.ports.unwrap()[0].node_port {
            assert!((30000..=32767).contains(&p));
            assert!(ports.insert(p), "duplicate NodePort {p}");
        }
    }
    assert_eq!(ips.len(), 59);
    assert_eq!(ports.len(), 30);

    // Asking for a taken or out-of-range address is 422, naming the field.
    let taken = ips.iter().next().unwrap().clone();
    let (code, msg) = err_message(
        api.create(&PostParams::default(), &svc("dup", Some(&taken), false))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("spec.clusterIPs") && msg.contains("already allocated"),
        "{msg}"
    );
    let (code, msg) = err_message(
        api.create(
            &PostParams::default(),
            &svc("out", Some("10.97.0.1"), false),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(msg.contains("not in the valid range"), "{msg}");
    assert!(api.get_opt("dup").await.unwrap().is_none());

    // After a restart the allocations are still known: the two free addresses, then none.
    server.restart();
    let api: Api<Service> = Api::namespaced(server.client().await, "default");
    for name in ["a1", "a2"] {
        let ip = api
            .create(&PostParams::default(), &svc(name, None, false))
            .await
            .unwrap()
            .spec
            .unwrap()
            .cluster_ip
            .unwrap();
        assert!(
            ips.insert(ip.clone()),
            "{ip} handed out twice across a restart"
        );
    }
    let (code, msg) = err_message(
        api.create(&PostParams::default(), &svc("full", None, false))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422, "{msg}");

    // Deleting a Service releases its address for someone else.
    api.delete("s0", &DeleteParams::default()).await.unwrap();
    let freed = api
        .create(&PostParams::default(), &svc("reuse", None, false))
        .await
        .unwrap();
    assert!(freed.spec.unwrap().cluster_ip.is_some());
    // Headless Services get no address.
    let headless = api
        .create(
            &PostParams::default(),
            &svc("headless", Some("None"), false),
        )
        .await
        .unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
}
