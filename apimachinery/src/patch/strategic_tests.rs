//! Strategic merge patch cases modeled on what `kubectl apply` / `kubectl patch` send.

use serde_json::{json, Value};

use super::{apply_patch, strategic_merge_patch, PatchError};

fn smp(original: Value, patch: Value, kind: &str) -> Value {
    strategic_merge_patch(&original, &patch, kind).unwrap_or_else(|e| panic!("patch failed: {e}"))
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web", "image": "nginx:1.25",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "resources": {"limits": {"cpu": "500m"}}
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "k1", "operator": "Exists"}]
                }
            }
        },
        "status": {"observedGeneration": 3}
    })
}

#[test]
fn apply_changes_image_and_adds_a_container_keeping_live_fields() {
    let patch = json!({"spec": {"template": {"spec": {
    "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
    "containers": [
        {"image": "nginx:1.27", "name": "web"},
        {"image": "busybox", "name": "sidecar", "command": ["sleep", "inf"]}
    ]}}}});
    let got = smp(deployment(), patch, "Deployment");
    let containers = &got["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["web", "sidecar"]);
    assert_eq!(containers[0]["image"], "nginx:1.27");
    assert_eq!(
        containers[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(
        containers[1],
        json!({"name": "sidecar", "image": "busybox", "command": ["sleep", "inf"]})
    );
    assert_eq!(got["spec"]["replicas"], 2);
    assert_eq!(got["status"], json!({"observedGeneration": 3}));
}

#[test]
fn apply_removes_a_container_and_an_env_var_with_delete_directives() {
    let mut live = deployment();
    live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let patch = json!({"spec": {"template": {"spec": {
    "$setElementOrder/containers": [{"name": "web"}],
    "containers": [
        {"name": "web", "$setElementOrder/env": [{"name": "B"}, {"name": "C"}],
         "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "A"}]},
        {"$patch": "delete", "name": "sidecar"}
    ]}}}});
    let got = smp(live, patch, "Deployment");
    let containers = &got["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["web"]);
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "B", "value": "2"}, {"name": "C", "value": "3"}])
    );
}

#[test]
fn set_element_order_inserts_env_in_the_middle() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web",
        "$setElementOrder/env": [{"name": "A"}, {"name": "MID"}, {"name": "B"}],
        "env": [{"name": "MID", "value": "m"}]}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(
        names(&got["spec"]["template"]["spec"]["containers"][0]["env"]),
        ["A", "MID", "B"]
    );
}

#[test]
fn kubectl_patch_without_order_puts_new_elements_first_like_upstream() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "NEW", "value": "x"}]}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(
        names(&got["spec"]["template"]["spec"]["containers"][0]["env"]),
        ["NEW", "A", "B"]
    );
}

#[test]
fn ports_merge_by_container_port_and_service_port() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web",
        "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}])
    );
    let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}], "clusterIP": "10.96.0.10"}});
    let got = smp(
        svc,
        json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
        "Service",
    );
    assert_eq!(
        got["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9090, "protocol": "TCP"}])
    );
    assert_eq!(got["spec"]["clusterIP"], "10.96.0.10");
}

#[test]
fn null_deletes_keys_and_missing_keys_are_ignored() {
    let patch = json!({"metadata": {"labels": {"tier": null, "nope": null}},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "resources": null}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(got["metadata"]["labels"], json!({"app": "web"}));
    assert!(got["spec"]["template"]["spec"]["containers"][0]
        .get("resources")
        .is_none());
}

#[test]
fn untagged_lists_are_replaced() {
    let got = smp(
        deployment(),
        json!({"spec": {"template": {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}}}),
        "Deployment",
    );
    assert_eq!(
        got["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "k2", "operator": "Exists"}])
    );
    let slice = json!({"endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]});
    let got = smp(
        slice,
        json!({"endpoints": [{"addresses": ["10.0.0.2"]}]}),
        "EndpointSlice",
    );
    assert_eq!(got["endpoints"], json!([{"addresses": ["10.0.0.2"]}]));
    // Unknown kinds: even a `containers` list is replaced.
    let got = smp(
        json!({"spec": {"containers": [{"name": "a", "x": 1}]}}),
        json!({"spec": {"containers": [{"name": "a"}]}}),
        "Widget",
    );
    assert_eq!(got["spec"]["containers"], json!([{"name": "a"}]));
}

#[test]
fn retain_keys_switches_deployment_strategy_and_volume_source() {
    let patch = json!({"spec": {
        "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
        "template": {"spec": {
            "$setElementOrder/volumes": [{"name": "data"}],
            "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "cfg"}, "name": "data"}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(
        got["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cfg"}}])
    );
}

#[test]
fn patch_replace_directive_in_map_and_list() {
    let got = smp(
        deployment(),
        json!({"metadata": {"labels": {"$patch": "replace", "only": "me"}}}),
        "Deployment",
    );
    assert_eq!(got["metadata"]["labels"], json!({"only": "me"}));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}}}});
    let got = smp(deployment(), patch, "Deployment");
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"],
        json!([{"name": "solo", "image": "x"}])
    );
}

#[test]
fn patch_delete_directive_in_map_empties_it() {
    let got = smp(
        deployment(),
        json!({"spec": {"strategy": {"$patch": "delete"}}}),
        "Deployment",
    );
    assert_eq!(got["spec"]["strategy"], json!({}));
}

#[test]
fn finalizers_merge_as_a_set_with_deletions_and_order() {
    let live = json!({"metadata": {"finalizers": ["b", "e", "a", "c", "d"]}});
    let patch = json!({"metadata": {
        "$setElementOrder/finalizers": ["a", "b", "f"],
        "$deleteFromPrimitiveList/finalizers": ["c"],
        "finalizers": ["f"]}});
    let got = smp(live, patch, "ConfigMap");
    // Server-only e and d keep their places relative to a/b/f, as upstream's merge does.
    assert_eq!(
        got["metadata"]["finalizers"],
        json!(["e", "a", "b", "f", "d"])
    );
    let got = smp(
        json!({"metadata": {"finalizers": ["x"]}}),
        json!({"metadata": {"finalizers": ["x", "y"]}}),
        "Pod",
    );
    assert_eq!(got["metadata"]["finalizers"], json!(["x", "y"]));
}

#[test]
fn owner_references_merge_by_uid() {
    let live = json!({"metadata": {"ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "rs1", "controller": true}]}});
    let got = smp(
        live,
        json!({"metadata": {"ownerReferences": [{"uid": "u2", "kind": "ReplicaSet", "name": "rs2"}]}}),
        "Pod",
    );
    let uids: Vec<&str> = got["metadata"]["ownerReferences"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|o| o["uid"].as_str())
        .collect();
    assert_eq!(uids, ["u2", "u1"]);
}

#[test]
fn status_conditions_merge_by_type() {
    let live = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}});
    let got = smp(
        live,
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "reason": null}]}}),
        "Pod",
    );
    assert_eq!(
        got["status"]["conditions"],
        json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}])
    );
    let node = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]}});
    let got = smp(
        node,
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
        "Node",
    );
    assert_eq!(
        got["status"]["addresses"],
        json!([
        {"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n1"}])
    );
}

#[test]
fn cronjob_and_pod_templates_share_the_pod_spec_table() {
    let cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "initContainers": [{"name": "init", "image": "a", "args": ["x"]}]}}}}}});
    let got = smp(
        cj,
        json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "initContainers": [{"name": "init", "image": "b"}]}}}}}}),
        "CronJob",
    );
    assert_eq!(
        got["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"],
        json!([{"name": "init", "image": "b", "args": ["x"]}])
    );
}

#[test]
fn new_values_are_cleaned_of_nulls_and_directives() {
    let got = smp(
        json!({"spec": {}}),
        json!({"spec": {"template": {"metadata": {"labels": {"a": "1", "b": null}},
        "spec": {"containers": [{"name": "c", "env": [{"name": "X", "$patch": "delete"}]}]}}}}),
        "Deployment",
    );
    assert_eq!(
        got["spec"]["template"],
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "env": []}]}})
    );
}

#[test]
fn type_changes_replace_the_value() {
    let got = smp(
        json!({"data": {"a": "1"}, "x": [1]}),
        json!({"data": "text", "x": {"y": 1}}),
        "ConfigMap",
    );
    assert_eq!(got, json!({"data": "text", "x": {"y": 1}}));
}

#[test]
fn malformed_strategic_patches_are_errors() {
    let live = deployment();
    let bad = |patch: Value| -> PatchError {
        strategic_merge_patch(&live, &patch, "Deployment").expect_err("patch should be rejected")
    };
    let e = bad(json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}));
    assert!(
        e.to_string()
            .contains("does not contain declared merge key: name"),
        "{e}"
    );
    let e = bad(
        json!({"spec": {"template": {"spec": {"containers": [{"$patch": "merge", "name": "web"}]}}}}),
    );
    assert!(
        e.to_string()
            .contains("merging lists cannot yet be specified"),
        "{e}"
    );
    let e = bad(
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}}}),
    );
    assert!(e.to_string().contains("retainKeys"), "{e}");
    let e = bad(json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}, {"name": "web"}],
        "containers": [{"name": "web"}, {"name": "a"}]}}}}));
    assert!(
        e.to_string().contains("doesn't match $setElementOrder"),
        "{e}"
    );
    let e = bad(json!({"spec": {"$patch": "frobnicate"}}));
    assert!(e.to_string().contains("unknown patch type"), "{e}");
    let e = bad(json!({"metadata": {"finalizers": [{"a": 1}]}}));
    assert!(e.to_string().contains("without a merge key"), "{e}");
    let e = bad(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": ["A"]}]}}}}),
    );
    assert!(
        e.to_string()
            .contains("list element types are not identical"),
        "{e}"
    );
    assert!(matches!(bad(json!([1])), PatchError::BadPatch(_)));
    assert_eq!(bad(json!("x")).status_code(), 400);
}

#[test]
fn server_side_apply_creates_and_merges() {
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "managedFields": [{"manager": "kubectl"}]}, "data": {"a": "1"}});
    let created = apply_patch(None, &applied, "ConfigMap").expect("create");
    assert_eq!(
        created,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}})
    );

    let mut live = deployment();
    live["metadata"]["uid"] = json!("u-1");
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    let got = apply_patch(Some(&live), &applied, "Deployment").expect("apply");
    assert_eq!(got["metadata"]["uid"], "u-1");
    assert_eq!(got["spec"]["replicas"], 3);
    let web = &got["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(web["image"], "nginx:1.27");
    assert_eq!(web["ports"][0]["containerPort"], 80);
    assert!(apply_patch(None, &json!("x"), "Pod").is_err());
}

#[test]
fn keyed_merges_find_elements_by_value_not_by_bucket() {
    // Two keys equal as f64 but not as integers: each patch element merges into its own.
    let (a, b) = (9_007_199_254_740_993i64, 9_007_199_254_740_992i64);
    let live = json!({"spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": a, "name": "a"}, {"containerPort": b, "name": "b"}]}]}});
    let patch = json!({"spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": b, "protocol": "UDP"}, {"containerPort": 7, "name": "new"},
        {"containerPort": 7, "protocol": "TCP"}, {"containerPort": a, "$patch": "delete"}]}]}});
    let got = smp(live, patch, "Pod");
    assert_eq!(
        got["spec"]["containers"][0]["ports"],
        json!([{"containerPort": b, "name": "b", "protocol": "UDP"},
            {"containerPort": 7, "name": "new", "protocol": "TCP"}])
    );
}

#[test]
fn scalar_lists_union_by_value() {
    let live = json!({"metadata": {"finalizers": ["a", "b", 1]}});
    let patch = json!({"metadata": {"finalizers": ["c", "a", 1.0],
        "$deleteFromPrimitiveList/finalizers": ["b"]}});
    let got = smp(live, patch, "Pod");
    assert_eq!(got["metadata"]["finalizers"], json!(["c", "a", 1]));
}
