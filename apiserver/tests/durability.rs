//! kill -9 during a write load: every acknowledged write is there after a restart, and
//! resourceVersions never go backwards. On both stores: SQLite, and etcd (a real member).

use k8s_openapi::api::core::v1::ConfigMap;
use keelson_testing::{Apiserver, Etcd};
use kube::api::{Api, PostParams};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        serde_json::json!({ "metadata": { "name": name }, "data": { "k": name } }),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_on_sqlite() {
    acknowledged_writes_survive_kill_9(&[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_on_etcd() {
    let etcd = Etcd::start();
    acknowledged_writes_survive_kill_9(&["--etcd-servers", &etcd.endpoints()]).await
}

async fn acknowledged_writes_survive_kill_9(flags: &[&str]) {
    let mut server = Apiserver::start_with(flags);
    let mut highest_seen: u64 = 0;
    for round in 0..3 {
        let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
        let acked = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
        let mut writers = Vec::new();
        for w in 0..16 {
            let (api, acked) = (api.clone(), acked.clone());
            writers.push(tokio::spawn(async move {
                for i in 0.. {
                    let name = format!("r{round}-w{w}-{i}");
                    match api.create(&PostParams::default(), &cm(&name)).await {
                        Ok(c) => {
                            let rv = c.metadata.resource_version.unwrap().parse().unwrap();
                            acked.lock().unwrap().push((name, rv));
                        }
                        Err(_) => return,
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.kill9();
        for w in writers {
            let _ = w.await;
        }
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.len() > 50,
            "round {round}: only {} writes before the kill",
            acked.len()
        );
        server.start_again();
        let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
        let list = api.list(&Default::default()).await.unwrap();
        let stored: std::collections::HashSet<String> = list
            .items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        let lost: Vec<_> = acked.iter().filter(|(n, _)| !stored.contains(n)).collect();
        assert!(
            lost.is_empty(),
            "round {round}: {} acknowledged writes lost, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(3)]
        );
        let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
        let max_acked = acked.iter().map(|(_, rv)| *rv).max().unwrap();
        assert!(
            list_rv >= max_acked && list_rv >= highest_seen,
            "resourceVersion went backwards: {list_rv} < {max_acked}"
        );
        let next = api
            .create(&PostParams::default(), &cm(&format!("after-{round}")))
            .await
            .unwrap();
        let next_rv: u64 = next.metadata.resource_version.unwrap().parse().unwrap();
        assert!(
            next_rv > list_rv,
            "a new write got {next_rv}, not above {list_rv}"
        );
        highest_seen = next_rv;
    }
}
