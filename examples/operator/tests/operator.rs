//! A kube-rs operator against a real keelson-apiserver: the CustomResourceDefinition its derive
//! generates is accepted and established, the controller (kube-runtime) sees Greetings, writes
//! their ConfigMaps by server-side apply and their status, follows a change, and the garbage
//! collector's part is checked by the owner reference it set.

use keelson_example_operator::{Greeting, GreetingSpec};
use keelson_testing::{eventually, Apiserver, Daemon};
use kube::api::{Api, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::CustomResourceExt;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_rs_operator_runs_against_keelson() {
    let s = Apiserver::start();
    let _cm = Daemon::controller_manager(&s, &[]);
    let client = s.client().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &Greeting::crd())
        .await
        .expect("the derived CRD is accepted");
    let established = await_condition(
        crds,
        "greetings.example.keelson.dev",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(20), established)
        .await
        .expect("established in time")
        .expect("watching the CRD");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(keelson_example_operator::run(client.clone(), async move {
        let _ = stop_rx.await;
    }));
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), "default");
    let mut g = Greeting::new(
        "hello",
        GreetingSpec {
            message: "hi".into(),
            times: 2,
        },
    );
    g.metadata.namespace = Some("default".into());
    greetings
        .create(&PostParams::default(), &g)
        .await
        .expect("a Greeting");
    let data = tokio::task::spawn_blocking(move || {
        eventually("the Greeting's ConfigMap", Duration::from_secs(30), || {
            let out = s.kubectl(&[
                "get",
                "configmap",
                "hello-greeting",
                "-o",
                "jsonpath={.data.greeting}",
            ]);
            match String::from_utf8_lossy(&out.stdout).as_ref() {
                "hi\nhi" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        let owner = s.kubectl_ok(&[
            "get",
            "configmap",
            "hello-greeting",
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}",
        ]);
        assert_eq!(owner, "Greeting/hello");
        eventually("the Greeting's status", Duration::from_secs(30), || {
            let row = s.kubectl_ok(&["get", "gr", "hello", "--no-headers"]);
            match row.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["hello", "hi", "true"] => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        // A change is followed.
        let change = r#"{"spec":{"message":"hey","times":1}}"#;
        s.patch_merge("greeting", "hello", change).unwrap();
        eventually("the changed ConfigMap", Duration::from_secs(30), || {
            let out = s.kubectl_ok(&[
                "get",
                "configmap",
                "hello-greeting",
                "-o",
                "jsonpath={.data.greeting}",
            ]);
            (out == "hey").then_some(()).ok_or(out)
        });
        // Deleting the Greeting takes its ConfigMap (garbage collector, by the owner reference).
        s.kubectl_ok(&["delete", "greeting", "hello"]);
        eventually("the ConfigMap collected", Duration::from_secs(30), || {
            let out = s.kubectl(&["get", "configmap", "hello-greeting"]);
            (!out.status.success())
                .then_some(())
                .ok_or("still there".to_string())
        });
        s
    })
    .await
    .expect("the checks");
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(data);
}
