//! keelson-dns against an API server Keelson did not write: kmock's emulator (PyPI `kmock`),
//! which sends no resourceVersions or bookmarks. Services and EndpointSlices written there are
//! answered, and changes to them are followed (by relisting, as a watch cannot resume).

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::{ips, start_dns_with, udp, Dns};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_testing::{eventually, Kmock};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

/// Waits until `name` gets `code` and exactly the addresses `want`.
fn answers(dns: &Dns, name: &str, code: ResponseCode, want: &[&str]) {
    let want: Vec<IpAddr> = want.iter().map(|s| s.parse().unwrap()).collect();
    eventually(&format!("{name} -> {code:?} {want:?}"), WAIT, || {
        let m = udp(dns, name, RecordType::A)?;
        let got = ips(&m);
        if m.response_code() == code && got == want {
            Ok(())
        } else {
            Err(format!("{:?} {got:?}", m.response_code()))
        }
    });
}

fn db_slice(ready: bool) -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "db-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["10.244.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
            {"addresses": ["10.244.0.6"], "conditions": {"ready": ready}}
        ]
    }))
    .expect("slice")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_answers_from_kmocks_objects_and_follows_changes() {
    let kmock = Kmock::start(&["v1/services", "discovery.k8s.io/v1/endpointslices"]);
    let client = kmock.client().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    for svc in [
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default"},
               "spec": {"clusterIP": "10.96.100.20", "clusterIPs": ["10.96.100.20"],
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "db", "namespace": "default"},
               "spec": {"clusterIP": "None", "clusterIPs": ["None"],
                        "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]}}),
    ] {
        let svc: Service = serde_json::from_value(svc).expect("service");
        svcs.create(&PostParams::default(), &svc)
            .await
            .expect("create service");
    }
    slices
        .create(&PostParams::default(), &db_slice(true))
        .await
        .expect("create slice");

    let log = kmock.dir.path().join("keelson-dns.log");
    let dns = start_dns_with(&kmock.kubeconfig(), &log, &[]);
    tokio::task::block_in_place(|| {
        answers(
            &dns,
            "web.default.svc.cluster.local.",
            ResponseCode::NoError,
            &["10.96.100.20"],
        );
        answers(
            &dns,
            "db.default.svc.cluster.local.",
            ResponseCode::NoError,
            &["10.244.0.5", "10.244.0.6"],
        );
        answers(
            &dns,
            "db-0.db.default.svc.cluster.local.",
            ResponseCode::NoError,
            &["10.244.0.5"],
        );
    });

    // Changes arrive without resourceVersions: keelson-dns relists and follows them.
    slices
        .patch(
            "db-1",
            &PatchParams::default(),
            &Patch::Merge(&db_slice(false)),
        )
        .await
        .expect("patch slice");
    svcs.delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    tokio::task::block_in_place(|| {
        answers(
            &dns,
            "db.default.svc.cluster.local.",
            ResponseCode::NoError,
            &["10.244.0.5"],
        );
        answers(
            &dns,
            "web.default.svc.cluster.local.",
            ResponseCode::NXDomain,
            &[],
        );
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("without metadata.resourceVersion"),
        "keelson-dns does not say why it relists:\n{text}"
    );
}
