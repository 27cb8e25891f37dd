//! The repository's examples/ (applied by the cluster tests) must pass defaulting and validation,
//! and so must the ReplicaSet and Pods a controller derives from the example Deployment.

use keelson_apiserver_registry::{apply_defaults, resources, validate};
use serde::Deserialize;
use serde_json::{json, Value};

fn examples() -> Vec<Value> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut docs = Vec::new();
    for name in ["deployment.yaml", "service.yaml", "ingress.yaml"] {
        let path = format!("{dir}/{name}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        for doc in serde_norway::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
            docs.push(v);
        }
    }
    docs
}

fn admit(mut obj: Value) -> Value {
    let kind = obj["kind"].as_str().unwrap_or("").to_string();
    obj["metadata"]["namespace"] = json!("default");
    apply_defaults(&kind, &mut obj);
    let causes = validate(&kind, &obj, None);
    assert!(causes.is_empty(), "{kind} rejected: {causes:?}");
    let res = resources::by_kind(&kind).unwrap_or_else(|| panic!("{kind} is not served"));
    assert_eq!((res.decode)(&obj), Ok(()), "{kind} does not decode");
    obj
}

#[test]
fn examples_are_valid() {
    let docs = examples();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in ["Deployment", "Service", "Ingress", "IngressClass"] {
        assert!(kinds.contains(&kind), "examples/ has no {kind}: {kinds:?}");
    }
    for doc in docs {
        admit(doc);
    }
}

#[test]
fn objects_derived_from_the_example_deployment_are_valid() {
    let deployment = examples()
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("examples/deployment.yaml holds a Deployment");
    let deployment = admit(deployment);
    let mut template = deployment["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!("5d9c7b");
    let mut selector = deployment["spec"]["selector"].clone();
    selector["matchLabels"]["pod-template-hash"] = json!("5d9c7b");
    let rs = admit(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d9c7b"},
        "spec": {"replicas": 3, "selector": selector, "template": template}}));
    let pod = admit(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d9c7b-x2x9k", "labels": rs["spec"]["template"]["metadata"]["labels"]},
        "spec": rs["spec"]["template"]["spec"]}));
    assert_eq!(pod["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
}
