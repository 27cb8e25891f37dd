//! Namespace limits against a real keelson-apiserver and the real controller manager, driven
//! by kubectl: a ResourceQuota refuses what would exceed it with upstream's message and its
//! usage shows in `kubectl describe quota` (kept by the resource quota controller, given back
//! when pods go); a LimitRange's defaults appear on a pod without requests and its max refuses
//! a pod over it; PriorityClasses give pods their priority.

use std::time::Duration;

mod common;

use common::Cluster;
use keelson_testing::eventually;

fn pod(name: &str, extra_container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: busybox\n{extra_container}"
    )
}

/// kubectl create that must fail; its stderr.
fn refused(c: &Cluster, yaml: &str) -> String {
    let out = c.api.kubectl_stdin(&["create", "-f", "-"], yaml);
    assert!(!out.status.success(), "created:\n{yaml}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn used(c: &Cluster, quota: &str, resource: &str) -> String {
    c.ok(&[
        "get",
        "quota",
        quota,
        "-o",
        &format!("jsonpath={{.status.used.{}}}", resource.replace('.', "\\.")),
    ])
}

#[test]
fn a_quota_of_two_pods_refuses_the_third_and_frees_a_place_when_one_goes() {
    let c = Cluster::start();
    c.ok(&[
        "create",
        "quota",
        "q",
        // The default namespace's `kubernetes` Service counts, as upstream: room for one more.
        "--hard=pods=2,services=2,count/configmaps=5",
    ]);
    // Until the controller has synced status.hard, upstream refuses rather than guess.
    eventually(
        "the quota's status",
        Duration::from_secs(20),
        || match used(&c, "q", "pods").as_str() {
            "0" => Ok(()),
            other => Err(format!("used pods {other:?}")),
        },
    );
    c.api.kubectl_stdin(&["create", "-f", "-"], &pod("a", ""));
    c.api.kubectl_stdin(&["create", "-f", "-"], &pod("b", ""));
    let err = refused(&c, &pod("c", ""));
    assert!(
        err.contains(r#"pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"#),
        "{err}"
    );
    let describe = c.ok(&["describe", "quota", "q"]);
    let pods_line = describe
        .lines()
        .find(|l| l.starts_with("pods"))
        .unwrap_or("");
    assert_eq!(
        pods_line.split_whitespace().collect::<Vec<_>>(),
        ["pods", "2", "2"],
        "{describe}"
    );
    let row = c.ok(&["get", "quota", "q", "--no-headers"]);
    assert!(row.contains("pods: 2/2"), "{row}");
    // Other kinds are counted too: one Service fits, the second does not.
    c.ok(&["create", "service", "clusterip", "s1", "--tcp=80:80"]);
    let out = c
        .api
        .kubectl(&["create", "service", "clusterip", "s2", "--tcp=80:80"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "exceeded quota: q, requested: services=1, used: services=2, limited: services=2"
        ),
        "{err}"
    );
    c.ok(&["create", "configmap", "cm1"]);
    assert_eq!(used(&c, "q", "count/configmaps"), "1");
    // A deleted pod gives its place back once the controller recounts.
    // Not bound to a node: deleted at once.
    c.ok(&["delete", "pod", "a"]);
    eventually(
        "pod a's place given back",
        Duration::from_secs(30),
        || match used(&c, "q", "pods").as_str() {
            "1" => Ok(()),
            other => Err(format!("used pods {other:?}")),
        },
    );
    c.api.kubectl_stdin(&["create", "-f", "-"], &pod("c", ""));
    assert!(c.ok(&["get", "pod", "c", "-o", "name"]).contains("pod/c"));
}

#[test]
fn compute_quotas_need_requests_and_a_limit_range_supplies_them() {
    let c = Cluster::start();
    c.ok(&[
        "create",
        "quota",
        "compute",
        "--hard=requests.cpu=1,limits.memory=1Gi",
    ]);
    eventually(
        "the quota's status",
        Duration::from_secs(20),
        || match used(&c, "compute", "requests.cpu").as_str() {
            "0" => Ok(()),
            other => Err(format!("used requests.cpu {other:?}")),
        },
    );
    let err = refused(&c, &pod("bare", ""));
    assert!(
        err.contains(r#"pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: app; requests.cpu for: app"#),
        "{err}"
    );
    c.api.apply(
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: defaults\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 500m, memory: 256Mi}\n    defaultRequest: {cpu: 250m, memory: 128Mi}\n    max: {cpu: '1'}\n",
    );
    let limits = c.ok(&["get", "limits", "--no-headers"]);
    assert!(limits.starts_with("defaults"), "{limits}");
    c.api
        .kubectl_stdin(&["create", "-f", "-"], &pod("defaulted", ""));
    let resources = c.json(&["get", "pod", "defaulted", "-o", "json"]);
    let r = &resources["spec"]["containers"][0]["resources"];
    assert_eq!(r["requests"]["cpu"], "250m", "{r}");
    assert_eq!(r["requests"]["memory"], "128Mi", "{r}");
    assert_eq!(r["limits"]["cpu"], "500m", "{r}");
    assert_eq!(r["limits"]["memory"], "256Mi", "{r}");
    assert_eq!(resources["status"]["qosClass"], "Burstable");
    let note = &resources["metadata"]["annotations"]["kubernetes.io/limit-ranger"];
    assert_eq!(
        note,
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app"
    );
    assert_eq!(used(&c, "compute", "requests.cpu"), "250m");
    assert_eq!(used(&c, "compute", "limits.memory"), "256Mi");
    let err = refused(
        &c,
        &pod(
            "big",
            "    resources: {limits: {cpu: '2', memory: 100Mi}}\n",
        ),
    );
    assert!(
        err.contains(
            r#"pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#
        ),
        "{err}"
    );
    // A fifth defaulted pod would take requests.cpu to 1250m of 1 and limits.memory past 1Gi.
    for name in ["d2", "d3", "d4"] {
        c.api.kubectl_stdin(&["create", "-f", "-"], &pod(name, ""));
    }
    let err = refused(&c, &pod("d5", ""));
    assert!(
        err.contains("exceeded quota: compute, requested: limits.memory=256Mi,requests.cpu=250m, used: limits.memory=1Gi,requests.cpu=1, limited: limits.memory=1Gi,requests.cpu=1"),
        "{err}"
    );
}

#[test]
fn priority_classes_give_pods_their_priority() {
    let c = Cluster::start();
    let classes = c.ok(&["get", "priorityclass", "--no-headers"]);
    for (name, value) in [
        ("system-cluster-critical", "2000000000"),
        ("system-node-critical", "2000001000"),
    ] {
        let row = classes.lines().find(|l| l.starts_with(name)).unwrap_or("");
        assert!(row.contains(value), "{classes}");
    }
    c.ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=important",
    ]);
    c.ok(&[
        "create",
        "priorityclass",
        "low",
        "--value=10",
        "--global-default",
        "--preemption-policy=Never",
    ]);
    let err = c.api.kubectl(&[
        "create",
        "priorityclass",
        "other",
        "--value=5",
        "--global-default",
    ]);
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(
        err.contains("PriorityClass low is already marked as default. Only one default can exist"),
        "{err}"
    );
    let err = c
        .api
        .kubectl(&["create", "priorityclass", "system-mine", "--value=5"]);
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(
        err.contains("priority class names with 'system-' prefix are reserved"),
        "{err}"
    );
    c.api.kubectl_stdin(
        &["create", "-f", "-"],
        &pod("vip", "").replace("spec:\n", "spec:\n  priorityClassName: high\n"),
    );
    c.api
        .kubectl_stdin(&["create", "-f", "-"], &pod("plain", ""));
    let priority = |name: &str| {
        c.ok(&[
            "get",
            "pod",
            name,
            "-o",
            "jsonpath={.spec.priority} {.spec.priorityClassName} {.spec.preemptionPolicy}",
        ])
    };
    assert_eq!(priority("vip"), "1000 high PreemptLowerPriority");
    assert_eq!(
        priority("plain"),
        "10 low Never",
        "the global default applies"
    );
    let err = refused(
        &c,
        &pod("ghost", "").replace("spec:\n", "spec:\n  priorityClassName: nope\n"),
    );
    assert!(
        err.contains(r#"pods "ghost" is forbidden: no PriorityClass with name nope was found"#),
        "{err}"
    );
    let err = refused(
        &c,
        &pod("cheat", "").replace(
            "spec:\n",
            "spec:\n  priorityClassName: high\n  priority: 5\n",
        ),
    );
    assert!(err.contains("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"), "{err}");
    let err = c
        .api
        .patch_merge("priorityclass", "high", r#"{"value":7}"#)
        .unwrap_err();
    assert!(
        err.contains("value: Forbidden: may not be changed in an update."),
        "{err}"
    );
}

/// Creates racing for a quota's last places while the controller recounts (every create wakes
/// it): the admission charges before it stores (and a Service's ClusterIP is allocated between
/// the two), so a recount in that gap must not give a paid-for place away again. Ten rounds of
/// eight Pods and eight Services at once against room for three of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_never_exceed_the_quota_while_it_is_recounted() {
    use k8s_openapi::api::core::v1::{Pod, Service};
    use kube::api::{Api, DeleteParams, ListParams, PostParams};
    let c = Cluster::start();
    c.ok(&["create", "namespace", "race"]);
    c.ok(&[
        "create",
        "quota",
        "q",
        "-n",
        "race",
        "--hard=pods=3,services=3",
    ]);
    let client = c.api.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "race");
    let services: Api<Service> = Api::namespaced(client, "race");
    let room = |resource: &str| {
        let quota = c.json(&["get", "quota", "q", "-n", "race", "-o", "json"]);
        let used = &quota["status"]["used"][resource];
        match used.as_str() {
            Some("0") => Ok(()),
            _ => Err(format!("used {resource} {used}")),
        }
    };
    for round in 0..10 {
        tokio::task::block_in_place(|| {
            eventually(
                "the quota's places all free",
                Duration::from_secs(30),
                || room("pods").and(room("services")),
            )
        });
        let pod_creates = (0..8).map(|i| {
            let pods = pods.clone();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": format!("p{round}-{i}") },
                "spec": { "containers": [{ "name": "app", "image": "busybox" }] },
            }))
            .unwrap();
            async move { pods.create(&PostParams::default(), &pod).await.is_ok() }
        });
        let service_creates = (0..8).map(|i| {
            let services = services.clone();
            let svc: Service = serde_json::from_value(serde_json::json!({
                "metadata": { "name": format!("s{round}-{i}") },
                "spec": { "ports": [{ "port": 80 }] },
            }))
            .unwrap();
            async move { services.create(&PostParams::default(), &svc).await.is_ok() }
        });
        let (pods_ok, services_ok) = futures::future::join(
            futures::future::join_all(pod_creates),
            futures::future::join_all(service_creates),
        )
        .await;
        let all = ListParams::default();
        let listed_pods = pods.list(&all).await.unwrap().items.len();
        let listed_services = services.list(&all).await.unwrap().items.len();
        let created = |oks: &[bool]| oks.iter().filter(|ok| **ok).count();
        assert!(
            listed_pods <= 3 && listed_services <= 3,
            "round {round}: {} pods and {} services created, {listed_pods} and \
             {listed_services} listed, quota of 3 each\n{}",
            created(&pods_ok),
            created(&services_ok),
            c.log()
        );
        pods.delete_collection(&DeleteParams::default(), &all)
            .await
            .unwrap();
        services
            .delete_collection(&DeleteParams::default(), &all)
            .await
            .unwrap();
    }
}
