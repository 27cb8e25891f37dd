//! The StatefulSet controller against a real keelson-apiserver, driven by kubectl. No agent or
//! scheduler runs: the test plays the node by reporting pods Running and Ready through the
//! status subresource (pods that never ran on a node are deleted at once).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod common;

use common::Cluster;
use keelson_testing::eventually;
use serde_json::Value;

const SET: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: { app: db }
  ports: [{ port: 80 }]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 3
  serviceName: db
  selector:
    matchLabels: { app: db }
  template:
    metadata:
      labels: { app: db }
    spec:
      containers:
      - name: c
        image: db:1
        volumeMounts: [{ name: data, mountPath: /data }]
  volumeClaimTemplates:
  - metadata: { name: data }
    spec:
      accessModes: [ReadWriteOnce]
      resources: { requests: { storage: 1Gi } }
"#;

impl Cluster {
    /// The set's pods that are not being deleted, by name.
    fn pods(&self) -> BTreeMap<String, Value> {
        self.live(&["pods", "-l", "app=db"])
            .into_iter()
            .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
            .collect()
    }

    fn names(&self) -> Vec<String> {
        self.pods().into_keys().collect()
    }

    fn wait_names(&self, want: &[&str]) -> BTreeMap<String, Value> {
        eventually("the set's pods", Duration::from_secs(60), || {
            let pods = self.pods();
            let names: Vec<&str> = pods.keys().map(String::as_str).collect();
            (names == want)
                .then(|| pods.clone())
                .ok_or_else(|| format!("pods {names:?}, want {want:?}\n{}", self.log()))
        })
    }

    /// What an agent reports once the pod's containers run and pass readiness (an address
    /// from the pod's ordinal, so the EndpointSlices list it).
    fn mark_ready(&self, name: &str) {
        let ordinal: u8 = name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let ip = format!("10.244.0.{}", 10 + ordinal);
        // A pod deleted meanwhile (a rollout step) may be gone: not an error.
        let _ = self.api.kubectl_cmd().mark_pod_ready(name, Some(&ip));
    }

    fn mark_all_ready(&self) {
        for (name, pod) in self.pods() {
            if pod["status"]["phase"] != "Running" {
                self.mark_ready(&name);
            }
        }
    }

    /// Claim name -> uid.
    fn claims(&self) -> BTreeMap<String, String> {
        let list = self.json(&["get", "pvc", "-o", "json"]);
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let m = &c["metadata"];
                (
                    m["name"].as_str().unwrap().into(),
                    m["uid"].as_str().unwrap().into(),
                )
            })
            .collect()
    }

    fn sts(&self, path: &str) -> String {
        self.ok(&["get", "sts", "web", "-o", &format!("jsonpath={path}")])
    }

    fn image(pod: &Value) -> &str {
        pod["spec"]["containers"][0]["image"].as_str().unwrap_or("")
    }
}

#[test]
fn pods_start_in_order_with_stable_names_and_claims_that_outlive_them() {
    let c = Cluster::start();
    c.api.apply(SET);
    let pods = c.wait_names(&["web-0"]);
    assert!(c.claims().contains_key("data-web-0"), "{:?}", c.claims());
    let pod = &pods["web-0"];
    assert_eq!(pod["spec"]["hostname"], "web-0");
    assert_eq!(pod["spec"]["subdomain"], "db");
    let labels = &pod["metadata"]["labels"];
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-0");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "0");
    let volume = &pod["spec"]["volumes"][0];
    assert_eq!(volume["persistentVolumeClaim"]["claimName"], "data-web-0");
    let revision = eventually("the update revision", Duration::from_secs(20), || {
        Some(c.sts("{.status.updateRevision}"))
            .filter(|r| !r.is_empty())
            .ok_or_else(|| "none yet".to_string())
    });
    assert_eq!(labels["controller-revision-hash"], revision.as_str());

    // kubectl describe shows upstream's Events on the set.
    eventually("the set's Events", Duration::from_secs(20), || {
        let out = c.ok(&["describe", "sts", "web"]);
        let want = [
            "create Claim data-web-0 Pod web-0 in StatefulSet web success",
            "create Pod web-0 in StatefulSet web successful",
        ];
        want.iter()
            .all(|w| out.contains(w))
            .then_some(())
            .ok_or(out)
    });

    // OrderedReady: web-1 waits until web-0 is Running and Ready.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.names(), ["web-0"]);
    c.mark_ready("web-0");
    c.wait_names(&["web-0", "web-1"]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(c.names(), ["web-0", "web-1"]);
    c.mark_ready("web-1");
    c.wait_names(&["web-0", "web-1", "web-2"]);
    c.mark_ready("web-2");
    eventually("READY 3/3", Duration::from_secs(30), || {
        let table = c.ok(&["get", "sts", "web"]);
        let row: Vec<&str> = table
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        (table.starts_with("NAME") && row.get(..2) == Some(&["web", "3/3"][..]))
            .then_some(())
            .ok_or(table)
    });
    let claims = c.claims();
    let names: Vec<&str> = claims.keys().map(String::as_str).collect();
    assert_eq!(names, ["data-web-0", "data-web-1", "data-web-2"]);
    // The headless Service's endpoints carry each pod's hostname: the DNS names web-N.db.
    eventually("endpoint hostnames", Duration::from_secs(30), || {
        let path = "jsonpath={range .items[*].endpoints[*]}{.hostname}={.addresses[0]} {end}";
        let out = c.ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=db",
            "-o",
            path,
        ]);
        let mut got: Vec<&str> = out.split_whitespace().collect();
        got.sort();
        (got == [
            "web-0=10.244.0.10",
            "web-1=10.244.0.11",
            "web-2=10.244.0.12",
        ])
        .then_some(())
        .ok_or(out)
    });

    // A deleted pod comes back under its name, with the same claim.
    let old_uid = c.pods()["web-1"]["metadata"]["uid"].clone();
    c.ok(&["delete", "pod", "web-1"]);
    eventually("web-1 made again", Duration::from_secs(30), || {
        let pods = c.pods();
        pods.get("web-1")
            .filter(|p| p["metadata"]["uid"] != old_uid)
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", pods.keys()))
    });
    assert_eq!(c.claims(), claims, "the claim is the same object");
    c.mark_ready("web-1");

    // Scale down: the highest ordinal goes first, and the claims stay.
    c.ok(&["scale", "sts", "web", "--replicas=1"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let names = c.names();
        assert!(
            names.contains(&"web-1".into()) || !names.contains(&"web-2".into()),
            "web-1 went before web-2: {names:?}"
        );
        if names == ["web-0"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "scale down stuck at {names:?}\n{}",
            c.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.claims(), claims, "scale-down keeps the claims");
    eventually("status replicas 1", Duration::from_secs(20), || {
        let s = c.sts("{.status.replicas} {.status.readyReplicas}");
        (s == "1 1").then_some(()).ok_or(s)
    });

    // Scaling up again gives web-1 its old claim back.
    c.ok(&["scale", "sts", "web", "--replicas=2"]);
    let pods = c.wait_names(&["web-0", "web-1"]);
    assert_eq!(
        pods["web-1"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "data-web-1"
    );
    assert_eq!(c.claims(), claims);
}

#[test]
fn a_partitioned_rolling_update_then_rollout_history_and_undo() {
    let c = Cluster::start();
    c.api.apply(SET);
    eventually("three ready pods", Duration::from_secs(60), || {
        c.mark_all_ready();
        let s = c.sts("{.status.readyReplicas}");
        (s == "3").then_some(()).ok_or(s)
    });
    let first = c.sts("{.status.currentRevision}");
    let partition_1_db_2 = r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":1}},"template":{"spec":{"containers":[{"name":"c","image":"db:2","volumeMounts":[{"name":"data","mountPath":"/data"}]}]}}}}"#;
    c.api.patch_merge("sts", "web", partition_1_db_2).unwrap();
    // web-2 then web-1 are replaced; web-0, below the partition, keeps db:1.
    eventually("web-1 and web-2 on db:2", Duration::from_secs(60), || {
        c.mark_all_ready();
        let pods = c.pods();
        let images: Vec<&str> = pods.values().map(Cluster::image).collect();
        let ready = c.sts("{.status.updatedReplicas} {.status.readyReplicas}");
        (images == ["db:1", "db:2", "db:2"] && ready == "2 3")
            .then_some(())
            .ok_or(format!("{images:?} {ready}"))
    });
    let second = c.sts("{.status.updateRevision}");
    assert_ne!(second, first);
    assert_eq!(c.sts("{.status.currentRevision}"), first);
    let out = c.ok(&["rollout", "status", "sts/web", "--timeout=30s"]);
    assert!(
        out.contains("partitioned roll out complete: 2 new pods have been updated"),
        "{out}"
    );

    let partition_0 = r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#;
    c.api.patch_merge("sts", "web", partition_0).unwrap();
    eventually("every pod on db:2", Duration::from_secs(60), || {
        c.mark_all_ready();
        let s =
            c.sts("{.status.currentRevision} {.status.updatedReplicas} {.status.readyReplicas}");
        (s == format!("{second} 3 3")).then_some(()).ok_or(s)
    });
    let history = c.ok(&["rollout", "history", "sts/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let second_template = c.ok(&["rollout", "history", "sts/web", "--revision=2"]);
    assert!(second_template.contains("db:2"), "{second_template}");

    // Undo goes back to the first template, whose revision becomes the newest (3).
    let out = c.ok(&["rollout", "undo", "sts/web"]);
    assert!(out.contains("rolled back"), "{out}");
    eventually("every pod back on db:1", Duration::from_secs(90), || {
        c.mark_all_ready();
        let pods = c.pods();
        let images: Vec<&str> = pods.values().map(Cluster::image).collect();
        let s = c.sts("{.status.currentRevision} {.status.readyReplicas}");
        (images == ["db:1"; 3] && s == format!("{first} 3"))
            .then_some(())
            .ok_or(format!("{images:?} {s}"))
    });
    let number = c.ok(&[
        "get",
        "controllerrevision",
        &first,
        "-o",
        "jsonpath={.revision}",
    ]);
    assert_eq!(number, "3");
    let table = c.ok(&["get", "controllerrevisions"]);
    assert!(
        table.starts_with("NAME") && table.contains("statefulset.apps/web"),
        "{table}"
    );
}

#[test]
fn parallel_pods_start_together_and_when_scaled_delete_removes_the_claims() {
    let c = Cluster::start();
    let parallel = SET.replace(
        "  serviceName: db\n",
        "  serviceName: db\n  podManagementPolicy: Parallel\n  persistentVolumeClaimRetentionPolicy: { whenScaled: Delete }\n",
    );
    c.api.apply(&parallel);
    // No pod is ready, yet all three are made at once.
    c.wait_names(&["web-0", "web-1", "web-2"]);
    let policy = c.sts("{.spec.persistentVolumeClaimRetentionPolicy.whenDeleted}");
    assert_eq!(policy, "Retain", "defaulted");
    eventually("three claims", Duration::from_secs(20), || {
        let n = c.claims().len();
        (n == 3).then_some(()).ok_or(format!("{n} claims"))
    });
    c.ok(&["scale", "sts", "web", "--replicas=1"]);
    c.wait_names(&["web-0"]);
    // Gone, or held only by the pvc-protection finalizer until nothing uses them.
    eventually(
        "the claims of web-1 and web-2 deleted",
        Duration::from_secs(30),
        || {
            let claims = c.live(&["pvc"]);
            let live: Vec<&str> = claims
                .iter()
                .filter_map(|p| p["metadata"]["name"].as_str())
                .collect();
            (live == ["data-web-0"])
                .then_some(())
                .ok_or(format!("{live:?}"))
        },
    );

    // Deleted with --cascade=orphan and made again, the set takes its pod and revision back.
    let before = c.pods()["web-0"]["metadata"]["uid"].clone();
    let revision = c.sts("{.status.updateRevision}");
    c.ok(&["delete", "sts", "web", "--cascade=orphan"]);
    eventually("web-0 without an owner", Duration::from_secs(30), || {
        let pods = c.pods();
        let owners = &pods["web-0"]["metadata"]["ownerReferences"];
        (owners.is_null() || owners == &serde_json::json!([]))
            .then_some(())
            .ok_or(format!("{owners}"))
    });
    c.api.apply(&parallel.replace("replicas: 3", "replicas: 1"));
    let uid = eventually("the new set's uid", Duration::from_secs(20), || {
        Some(c.sts("{.metadata.uid}"))
            .filter(|u| !u.is_empty())
            .ok_or_else(|| "none".to_string())
    });
    eventually("web-0 adopted", Duration::from_secs(30), || {
        let pods = c.pods();
        let owner = &pods["web-0"]["metadata"]["ownerReferences"][0];
        (owner["uid"] == uid.as_str() && owner["controller"] == true)
            .then_some(())
            .ok_or(format!("{pods:?}"))
    });
    assert_eq!(
        c.pods()["web-0"]["metadata"]["uid"],
        before,
        "the same pod, not a new one"
    );
    eventually("the old revision adopted", Duration::from_secs(20), || {
        let s = c.sts("{.status.updateRevision} {.status.collisionCount}");
        (s == format!("{revision} ")).then_some(()).ok_or(s)
    });
}
