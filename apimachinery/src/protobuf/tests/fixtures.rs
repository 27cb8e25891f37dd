//! Bodies captured from kubectl v1.32 (`kubectl create ... -v=9` prints the protobuf it sends),
//! each beside the JSON kubectl prints for the same command with `--dry-run=client -o json`.
//! The commands are in `fixtures/README.md`.

use serde_json::{json, Value};

use crate::protobuf::decode;

fn fixture(bytes: &[u8]) -> Value {
    decode(bytes).unwrap()
}

/// Go writes a zero metav1.Time as `null`; the decoder leaves it out, which means the same.
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

macro_rules! pairs {
    ($($name:literal),* $(,)?) => {
        [$((
            $name,
            &include_bytes!(concat!("../fixtures/kubectl_create_", $name, ".pb"))[..],
            include_str!(concat!("../fixtures/kubectl_create_", $name, ".json")),
        )),*]
    };
}

#[test]
fn every_fixture_decodes_to_the_json_kubectl_would_send() {
    let pairs = pairs!(
        "namespace",
        "deployment",
        "configmap",
        "secret",
        "secret_dockercfg",
        "serviceaccount",
        "svc_clusterip",
        "svc_nodeport",
        "svc_externalname",
        "svc_lb",
        "ingress",
    );
    for (name, protobuf, json) in pairs {
        let want: Value = serde_json::from_str(json).unwrap();
        assert_eq!(fixture(protobuf), without_nulls(want), "fixture {name}");
    }
}

#[test]
fn create_namespace() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_namespace.pb"));
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pbns"}, "spec": {}, "status": {}})
    );
}

#[test]
fn create_configmap_from_literals() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_configmap.pb"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm1"},
            "data": {"a": "b", "greeting": "hello"}
        })
    );
}

#[test]
fn create_secret_generic_has_base64_data() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_secret.pb"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s1"},
            "data": {"a": "Yg=="},
            "type": "Opaque"
        })
    );
}

#[test]
fn create_secret_docker_registry() {
    let got = fixture(include_bytes!(
        "../fixtures/kubectl_create_secret_dockercfg.pb"
    ));
    assert_eq!(got["metadata"]["name"], "reg");
    assert_eq!(got["type"], "kubernetes.io/dockerconfigjson");
    let encoded = got["data"][".dockerconfigjson"].as_str().unwrap();
    // {"auths":{"r.example":{"username":"u","password":"p","auth":"dTpw"}}}, base64-encoded.
    assert!(encoded.starts_with("eyJhdXRocyI6eyJyLmV4YW1wbGUiOnsidXNlcm5hbWUiOiJ1Ii"));
}

#[test]
fn create_serviceaccount() {
    let got = fixture(include_bytes!(
        "../fixtures/kubectl_create_serviceaccount.pb"
    ));
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}})
    );
}

#[test]
fn create_deployment_with_replicas_port_and_command() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_deployment.pb"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "busybox",
                            "image": "busybox",
                            "command": ["sleep", "3600"],
                            "ports": [{"containerPort": 8080}],
                            "resources": {}
                        }]
                    }
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn create_service_clusterip() {
    let got = fixture(include_bytes!(
        "../fixtures/kubectl_create_svc_clusterip.pb"
    ));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "web"},
                "type": "ClusterIP"
            },
            "status": {"loadBalancer": {}}
        })
    );
}

#[test]
fn create_service_nodeport_keeps_node_port() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_svc_nodeport.pb"));
    assert_eq!(got["spec"]["type"], "NodePort");
    assert_eq!(
        got["spec"]["ports"],
        json!([{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080}])
    );
    assert_eq!(got["spec"]["selector"], json!({"app": "np"}));
}

#[test]
fn create_service_loadbalancer() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_svc_lb.pb"));
    assert_eq!(got["spec"]["type"], "LoadBalancer");
    assert_eq!(got["spec"]["ports"][0]["port"], 443);
    assert_eq!(got["spec"]["ports"][0]["targetPort"], 8443);
}

#[test]
fn create_service_externalname() {
    let got = fixture(include_bytes!(
        "../fixtures/kubectl_create_svc_externalname.pb"
    ));
    assert_eq!(got["spec"]["type"], "ExternalName");
    assert_eq!(got["spec"]["externalName"], "example.com");
    assert!(got["spec"].get("ports").is_none());
}

#[test]
fn create_ingress_with_class_rules_and_default_backend() {
    let got = fixture(include_bytes!("../fixtures/kubectl_create_ingress.pb"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing"},
            "spec": {
                "ingressClassName": "keelson",
                "defaultBackend": {"service": {"name": "defsvc", "port": {"number": 80}}},
                "rules": [{
                    "host": "foo.com",
                    "http": {"paths": [
                        {"path": "/bar", "pathType": "Exact",
                         "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}},
                        {"path": "/baz", "pathType": "Prefix",
                         "backend": {"service": {"name": "svc2", "port": {"name": "http"}}}}
                    ]}
                }]
            },
            "status": {"loadBalancer": {}}
        })
    );
}
