//! API semantics real clients rely on: finalizers, paging, bookmarks and initial-events-end,
//! filtered watches, server-side apply, metadata-only lists, binding, scale, pods/log errors,
//! aggregated discovery and metrics.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use keelson_testing::Apiserver;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{json, Value};
use std::time::Duration;

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let s = Apiserver::start();
    let (code, _) = s.curl_admin(
        "POST",
        CM,
        None,
        Some(r#"{"metadata":{"name":"held","finalizers":["example.com/hold"]}}"#),
    );
    assert_eq!(code, 201);
    let (code, body) = s.curl_admin("DELETE", &format!("{CM}/held"), None, None);
    assert_eq!(code, 200, "{body}");
    let (code, body) = s.curl_admin("GET", &format!("{CM}/held"), None, None);
    assert_eq!(code, 200);
    assert!(parse(&body)["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = s.curl_admin(
        "PATCH",
        &format!("{CM}/held"),
        Some("application/merge-patch+json"),
        Some(r#"{"metadata":{"finalizers":null}}"#),
    );
    assert_eq!(code, 200);
    let (code, _) = s.curl_admin("GET", &format!("{CM}/held"), None, None);
    assert_eq!(code, 404);
}

/// ConfigMaps c0..c4 in `default`, labelled app=a.
fn five_config_maps(s: &Apiserver) {
    for i in 0..5 {
        let body = format!(r#"{{"metadata":{{"name":"c{i}","labels":{{"app":"a"}}}}}}"#);
        let (code, out) = s.curl_admin("POST", CM, None, Some(&body));
        assert_eq!(code, 201, "{out}");
    }
}

#[test]
fn lists_page_with_continue_tokens() {
    let s = Apiserver::start();
    five_config_maps(&s);
    let mut names = Vec::new();
    let mut cont = String::new();
    for page in 0.. {
        let path = format!(
            "{CM}?limit=2{}",
            if cont.is_empty() {
                String::new()
            } else {
                format!("&continue={cont}")
            }
        );
        let list = parse(&s.curl_admin("GET", &path, None, None).1);
        assert!(!list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .is_empty());
        names.extend(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
        );
        // What is left after this page, as upstream counts it for a list without selectors.
        let left = 5 - names.len();
        assert_eq!(
            list["metadata"]["remainingItemCount"].as_u64(),
            (left > 0).then_some(left as u64)
        );
        match list["metadata"]["continue"].as_str() {
            Some(c) => cont = c.to_string(),
            None => break,
        }
        assert!(page < 5, "paging never ended");
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
}

/// A reflector lists in pages, then watches from the last page's resourceVersion: every page
/// must carry the first page's, or what changed in the earlier pages meanwhile is never seen
/// (a scheduler's watch missed Pods bound while it read the later pages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_pages_keep_the_first_pages_revision() {
    let s = Apiserver::start();
    five_config_maps(&s);
    let api: Api<ConfigMap> = Api::namespaced(s.client().await, "default");
    // Without selectors (pages copied from the store) and with one (filtered first).
    for (round, query) in ["limit=2", "limit=2&labelSelector=app%3Da"]
        .iter()
        .enumerate()
    {
        let first = parse(&s.curl_admin("GET", &format!("{CM}?{query}"), None, None).1);
        let rev = first["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let token = first["metadata"]["continue"].as_str().unwrap().to_string();
        // c0, in the first page, changes before the second page is read.
        let (code, _) = s.curl_admin(
            "PATCH",
            &format!("{CM}/c0"),
            Some("application/merge-patch+json"),
            Some(&format!(r#"{{"data":{{"round":"{round}"}}}}"#)),
        );
        assert_eq!(code, 200);
        let mut token = token;
        let last = loop {
            let page = parse(
                &s.curl_admin("GET", &format!("{CM}?{query}&continue={token}"), None, None)
                    .1,
            );
            assert_eq!(
                page["metadata"]["resourceVersion"],
                json!(rev),
                "{query}: {page}"
            );
            match page["metadata"]["continue"].as_str() {
                Some(t) => token = t.to_string(),
                None => break page,
            }
        };
        let from = last["metadata"]["resourceVersion"].as_str().unwrap();
        let stream = api
            .watch(&WatchParams::default().timeout(5), from)
            .await
            .unwrap();
        futures::pin_mut!(stream);
        match stream.next().await.unwrap().unwrap() {
            WatchEvent::Modified(c) => {
                assert_eq!(c.metadata.name.as_deref(), Some("c0"));
                assert_eq!(c.data.unwrap()["round"], round.to_string());
            }
            other => panic!("{query}: expected c0 modified, got {other:?}"),
        }
    }
    let (code, body) = s.curl_admin("GET", &format!("{CM}?limit=2&continue=bm9wZQ"), None, None);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("invalid continue token"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sends_initial_events_end_and_bookmarks() {
    let s = Apiserver::start();
    let api: Api<ConfigMap> = Api::namespaced(s.client().await, "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await
    .unwrap();
    let wp = WatchParams::streaming_lists().timeout(30);
    let stream = api.watch(&wp, "0").await.unwrap();
    futures::pin_mut!(stream);
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(ref c) if c.metadata.name.as_deref() == Some("a")));
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => assert_eq!(
            b.metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .map(String::as_str),
            Some("true")
        ),
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    // A periodic bookmark follows within the bookmark period.
    let next = tokio::time::timeout(Duration::from_secs(15), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(next, WatchEvent::Bookmark(_)), "{next:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_filtered_watch_sees_objects_enter_and_leave() {
    let s = Apiserver::start();
    let api: Api<ConfigMap> = Api::namespaced(s.client().await, "default");
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let stream = api
        .watch(&WatchParams::default().labels("tier=web"), &rv)
        .await
        .unwrap();
    futures::pin_mut!(stream);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
    )
    .await
    .unwrap();
    let label = |v: Option<&str>| json!({"metadata": {"labels": {"tier": v}}});
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(label(Some("web"))),
    )
    .await
    .unwrap();
    api.patch("x", &PatchParams::default(), &Patch::Merge(label(None)))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        kinds.push(match stream.next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Modified(_) => "MODIFIED",
            _ => "OTHER",
        });
    }
    assert_eq!(kinds, ["ADDED", "DELETED"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_then_updates() {
    let s = Apiserver::start();
    let api: Api<ConfigMap> = Api::namespaced(s.client().await, "default");
    let pp = PatchParams::apply("keelson-test").force();
    let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let created = api.patch("ssa", &pp, &Patch::Apply(&v1)).await.unwrap();
    assert_eq!(created.data.unwrap()["a"], "1");
    let v2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "2"}});
    let updated = api.patch("ssa", &pp, &Patch::Apply(&v2)).await.unwrap();
    assert_eq!(updated.data.unwrap()["a"], "2");
    let again = api.patch("ssa", &pp, &Patch::Apply(&v2)).await.unwrap();
    assert_eq!(
        again.metadata.resource_version, updated.metadata.resource_version,
        "an unchanged apply must not write"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_lists_binding_and_scale() {
    let s = Apiserver::start();
    let client = s.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"generateName": "p-"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})).unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("p-") && name.len() == 7, "{name}");
    let meta = pods.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(meta.items[0].metadata.name.as_deref(), Some(name.as_str()));
    // Binding sets the node once; a second binding is a conflict.
    let binding = format!(
        r#"{{"apiVersion":"v1","kind":"Binding","metadata":{{"name":"{name}"}},"target":{{"kind":"Node","name":"n1"}}}}"#
    );
    let path = format!("/api/v1/namespaces/default/pods/{name}/binding");
    assert_eq!(s.curl_admin("POST", &path, None, Some(&binding)).0, 201);
    assert_eq!(s.curl_admin("POST", &path, None, Some(&binding)).0, 409);
    let bound = pods.get(&name).await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(conds
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    // One write, as upstream's binding: a watch from the Pod's creation sees a single change
    // carrying both the node and PodScheduled=True.
    let since = created.metadata.resource_version.clone().unwrap();
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = pods.watch(&params, &since).await.unwrap().boxed();
    let mut changes = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(1), events.next()).await {
        if let WatchEvent::Modified(p) = e.unwrap() {
            changes.push(p);
        }
    }
    assert_eq!(changes.len(), 1, "{changes:?}");
    let scheduled = changes[0]
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone());
    assert_eq!(
        changes[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    assert!(scheduled
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    // pods/log names the missing piece while no agent serves the node.
    let (code, body) = s.curl_admin(
        "GET",
        &format!("/api/v1/namespaces/default/pods/{name}/log"),
        None,
        None,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("node n1") && body.contains("not registered"),
        "{body}"
    );
    // The scale subresource reads and writes spec.replicas.
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})).unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let scale = deploys.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    deploys
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(deploys.get("d").await.unwrap().spec.replicas, Some(4));
    assert_eq!(
        deploys
            .get_scale("d")
            .await
            .unwrap()
            .status
            .unwrap()
            .selector
            .as_deref(),
        Some("a=b")
    );
    pods.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[test]
fn aggregated_discovery_and_metrics() {
    let s = Apiserver::start();
    let out = std::process::Command::new("curl")
        .args(["-sk", "-H", &format!("Authorization: Bearer {}", s.token())])
        .args(["-H", "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"])
        .arg(s.url("/apis"))
        .output()
        .unwrap();
    let list = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(list["kind"], "APIGroupDiscoveryList");
    let apps = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .unwrap();
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(deploy["scope"], "Namespaced");
    assert!(deploy["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["subresource"] == "scale" && s["responseKind"]["group"] == "autoscaling"));
    s.kubectl_ok(&["get", "pods"]);
    assert!(s.metric("apiserver_request_total{verb=\"LIST\",resource=\"pods\"") >= 1.0);
    let (_, text) = s.curl_admin("GET", "/metrics", None, None);
    assert!(
        text.contains("apiserver_request_duration_seconds_bucket"),
        "{text}"
    );
    for probe in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(s.curl("GET", probe, None, None, None).0, 200);
    }
}

#[test]
fn generation_is_kept_only_by_the_kinds_upstream_keeps_it_on() {
    let s = Apiserver::start();
    let generation = |kind: &str, name: &str| {
        let out = s.kubectl_ok(&["get", kind, name, "-o", "jsonpath={.metadata.generation}"]);
        out.trim().to_string()
    };
    s.kubectl_ok(&["create", "configmap", "plain", "--from-literal=a=1"]);
    s.kubectl_ok(&["label", "configmap", "plain", "x=y"]);
    s.kubectl_ok(&["patch", "configmap", "plain", "-p", r#"{"data":{"a":"2"}}"#]);
    assert_eq!(generation("configmap", "plain"), "", "a ConfigMap has none");
    s.kubectl_ok(&["create", "deployment", "web", "--image=busybox"]);
    assert_eq!(generation("deployment", "web"), "1");
    s.kubectl_ok(&["label", "deployment", "web", "x=y"]);
    assert_eq!(
        generation("deployment", "web"),
        "1",
        "metadata is not the spec"
    );
    s.kubectl_ok(&["scale", "deployment", "web", "--replicas=2"]);
    assert_eq!(generation("deployment", "web"), "2");
}
