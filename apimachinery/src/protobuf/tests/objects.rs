//! Objects built field by field with the test encoder, checked against the JSON Go would send.

use serde_json::json;

use super::encoder::{envelope, meta, Enc};
use crate::protobuf::decode;

fn int_or_string_int(v: i64) -> Enc {
    Enc::new().varint(1, 0).int(2, v).str(3, "")
}

fn int_or_string_str(s: &str) -> Enc {
    Enc::new().varint(1, 1).varint(2, 0).str(3, s)
}

fn quantity(s: &str) -> Enc {
    Enc::new().str(1, s)
}

#[test]
fn pod_with_containers_probes_env_and_volumes() {
    let probe = Enc::new()
        .msg(
            1,
            Enc::new().msg(
                2,
                Enc::new()
                    .str(1, "/healthz")
                    .msg(2, int_or_string_int(8080))
                    .str(3, "")
                    .str(4, "HTTP")
                    .msg(5, Enc::new().str(1, "X-Probe").str(2, "1")),
            ),
        )
        .varint(2, 5)
        .varint(3, 1)
        .varint(4, 10)
        .varint(5, 1)
        .varint(6, 3);
    let readiness = Enc::new()
        .msg(
            1,
            Enc::new().msg(3, Enc::new().msg(1, int_or_string_str("http"))),
        )
        .varint(2, 0);
    let exec_probe = Enc::new().msg(
        1,
        Enc::new().msg(1, Enc::new().str(1, "cat").str(1, "/tmp/ready")),
    );
    let resources = Enc::new()
        .msg(1, Enc::new().str(1, "cpu").msg(2, quantity("500m")))
        .msg(1, Enc::new().str(1, "memory").msg(2, quantity("128Mi")))
        .msg(2, Enc::new().str(1, "cpu").msg(2, quantity("100m")));
    let env = [
        Enc::new().str(1, "PLAIN").str(2, "v"),
        Enc::new().str(1, "NODE").str(2, "").msg(
            3,
            Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "spec.nodeName")),
        ),
        Enc::new().str(1, "FROM_CM").msg(
            3,
            Enc::new().msg(
                3,
                Enc::new()
                    .msg(1, Enc::new().str(1, "cm1"))
                    .str(2, "k")
                    .varint(3, 0),
            ),
        ),
        Enc::new().str(1, "FROM_SECRET").msg(
            3,
            Enc::new().msg(4, Enc::new().msg(1, Enc::new().str(1, "s1")).str(2, "pw")),
        ),
    ];
    let mut container = Enc::new()
        .str(1, "app")
        .str(2, "busybox:1.36")
        .str(3, "sh")
        .str(3, "-c")
        .str(4, "sleep 3600")
        .str(5, "/work")
        .msg(
            6,
            Enc::new()
                .str(1, "http")
                .varint(2, 0)
                .varint(3, 8080)
                .str(4, "TCP")
                .str(5, ""),
        );
    for e in env {
        container = container.msg(7, e);
    }
    let container = container
        .msg(8, resources)
        .msg(
            9,
            Enc::new()
                .str(1, "data")
                .varint(2, 1)
                .str(3, "/data")
                .str(4, "")
                .str(6, ""),
        )
        .msg(10, probe)
        .msg(11, readiness)
        .msg(22, exec_probe)
        .str(13, "/dev/termination-log")
        .str(14, "IfNotPresent")
        .varint(16, 0)
        .varint(17, 0)
        .varint(18, 0);
    let init = Enc::new()
        .str(1, "init")
        .str(2, "busybox")
        .msg(8, Enc::new());
    let volumes = [
        Enc::new().str(1, "data").msg(
            2,
            Enc::new().msg(2, Enc::new().str(1, "").msg(2, quantity("1Gi"))),
        ),
        Enc::new().str(1, "host").msg(
            2,
            Enc::new().msg(1, Enc::new().str(1, "/var/log").str(2, "Directory")),
        ),
        Enc::new().str(1, "cfg").msg(
            2,
            Enc::new().msg(
                19,
                Enc::new()
                    .msg(1, Enc::new().str(1, "cm1"))
                    .msg(2, Enc::new().str(1, "a").str(2, "a.txt"))
                    .varint(3, 0o644),
            ),
        ),
        Enc::new()
            .str(1, "sec")
            .msg(2, Enc::new().msg(6, Enc::new().str(1, "s1").varint(4, 1))),
    ];
    let mut spec = Enc::new();
    for v in volumes {
        spec = spec.msg(1, v);
    }
    let spec = spec
        .msg(20, init)
        .msg(2, container)
        .str(3, "Always")
        .int(4, 0)
        .str(6, "ClusterFirst")
        .entry(7, "disk", "ssd")
        .str(8, "sa1")
        .str(9, "")
        .str(10, "node-a")
        .varint(11, 1)
        .varint(12, 0)
        .varint(13, 0)
        .msg(
            22,
            Enc::new()
                .str(1, "node.kubernetes.io/not-ready")
                .str(2, "Exists")
                .str(3, "")
                .str(4, "NoExecute")
                .int(5, 300),
        );
    let pod = Enc::new()
        .msg(1, meta("web-0").entry(11, "app", "web"))
        .msg(2, spec)
        .msg(3, Enc::new().str(1, "").str(3, ""));
    let body = envelope("v1", "Pod", pod);
    let got = decode(&body).unwrap();
    let want = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "labels": {"app": "web"}},
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
                {"name": "cfg", "configMap": {"name": "cm1", "items": [{"key": "a", "path": "a.txt"}], "defaultMode": 420}},
                {"name": "sec", "secret": {"secretName": "s1", "optional": true}}
            ],
            "initContainers": [{"name": "init", "image": "busybox", "resources": {}}],
            "containers": [{
                "name": "app",
                "image": "busybox:1.36",
                "command": ["sh", "-c"],
                "args": ["sleep 3600"],
                "workingDir": "/work",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "PLAIN", "value": "v"},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                    {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "k", "optional": false}}},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "pw"}}}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
                "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP", "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                    "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3
                },
                "readinessProbe": {"tcpSocket": {"port": "http"}},
                "startupProbe": {"exec": {"command": ["cat", "/tmp/ready"]}},
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"disk": "ssd"},
            "serviceAccountName": "sa1",
            "nodeName": "node-a",
            "hostNetwork": true,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {}
    });
    assert_eq!(got, want);
}

#[test]
fn deployment_keeps_pointer_zeros_and_drops_value_zeros() {
    let spec = Enc::new()
        .int(1, 0) // replicas: *int32, explicit 0 means "scale to zero"
        .msg(2, Enc::new().entry(1, "app", "web"))
        .msg(3, Enc::new().msg(1, meta("")).msg(2, Enc::new()))
        .msg(
            4,
            Enc::new().str(1, "RollingUpdate").msg(
                2,
                Enc::new()
                    .msg(1, int_or_string_str("25%"))
                    .msg(2, int_or_string_int(0)),
            ),
        )
        .varint(5, 0) // minReadySeconds: int32 zero, omitted like Go's omitempty
        .int(6, 3)
        .varint(7, 0) // paused: false
        .int(9, 600);
    let body = envelope(
        "apps/v1",
        "Deployment",
        Enc::new().msg(1, meta("web")).msg(2, spec),
    );
    let got = decode(&body).unwrap();
    assert_eq!(
        got["spec"],
        json!({
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {}, "spec": {}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}},
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": 600
        })
    );
}

#[test]
fn replica_set_with_owner_reference_and_timestamps() {
    let owner = Enc::new()
        .str(5, "apps/v1")
        .str(1, "Deployment")
        .str(3, "web")
        .str(4, "uid-1")
        .varint(6, 1)
        .varint(7, 1);
    let metadata = Enc::new()
        .str(1, "web-abc")
        .str(3, "default")
        .str(5, "uid-2")
        .str(6, "42")
        .int(7, 2)
        .msg(8, Enc::new().int(1, 1_700_000_000).int(2, 5))
        .entry(12, "deployment.kubernetes.io/revision", "1")
        .msg(13, owner)
        .str(14, "example.com/cleanup")
        .msg(17, Enc::new().str(1, "kube-controller-manager"));
    let spec = Enc::new()
        .int(1, 2)
        .varint(4, 0)
        .msg(2, Enc::new().entry(1, "app", "web"));
    let status = Enc::new().varint(1, 2).varint(3, 1);
    let body = envelope(
        "apps/v1",
        "ReplicaSet",
        Enc::new().msg(1, metadata).msg(2, spec).msg(3, status),
    );
    let got = decode(&body).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": "web-abc", "namespace": "default", "uid": "uid-2",
                "resourceVersion": "42", "generation": 2,
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "annotations": {"deployment.kubernetes.io/revision": "1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                     "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}],
                "finalizers": ["example.com/cleanup"]
            },
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2, "observedGeneration": 1}
        })
    );
}

#[test]
fn service_with_every_spec_field() {
    let spec = Enc::new()
        .msg(
            1,
            Enc::new()
                .str(1, "http")
                .str(2, "TCP")
                .str(6, "kubernetes.io/h2c")
                .varint(3, 80)
                .msg(4, int_or_string_str("web"))
                .varint(5, 30001),
        )
        .entry(2, "app", "web")
        .str(3, "10.96.0.10")
        .str(18, "10.96.0.10")
        .str(4, "NodePort")
        .str(5, "192.0.2.1")
        .str(7, "ClientIP")
        .str(11, "Local")
        .varint(12, 0)
        .varint(13, 1)
        .msg(14, Enc::new().msg(1, Enc::new().int(1, 10800)))
        .str(19, "IPv4")
        .str(17, "SingleStack")
        .str(22, "Cluster");
    let body = envelope("v1", "Service", Enc::new().msg(1, meta("web")).msg(2, spec));
    let got = decode(&body).unwrap();
    assert_eq!(
        got["spec"],
        json!({
            "ports": [{"name": "http", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c",
                       "port": 80, "targetPort": "web", "nodePort": 30001}],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "type": "NodePort",
            "externalIPs": ["192.0.2.1"],
            "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Local",
            "publishNotReadyAddresses": true,
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        })
    );
}

#[test]
fn configmap_and_secret_maps_and_immutable_false() {
    let cm = Enc::new()
        .msg(1, meta("cm"))
        .varint(4, 0)
        .entry(2, "k", "v")
        .msg(3, Enc::new().str(1, "bin").bytes(2, &[0, 1, 0xff]));
    let got = decode(&envelope("v1", "ConfigMap", cm)).unwrap();
    assert_eq!(got["immutable"], false, "a *bool false is kept");
    assert_eq!(got["data"], json!({"k": "v"}));
    assert_eq!(got["binaryData"], json!({"bin": "AAH/"}));

    let secret = Enc::new()
        .msg(1, meta("s"))
        .varint(5, 1)
        .msg(2, Enc::new().str(1, "pw").bytes(2, b"hunter2"))
        .entry(4, "plain", "text")
        .str(3, "Opaque");
    let got = decode(&envelope("v1", "Secret", secret)).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "immutable": true, "data": {"pw": "aHVudGVyMg=="},
            "stringData": {"plain": "text"}, "type": "Opaque"
        })
    );
}

#[test]
fn ingress_class_uses_json_name_api_group() {
    let spec = Enc::new().str(1, "keelson.dev/ingress").msg(
        2,
        Enc::new()
            .str(1, "k8s.example.com")
            .str(2, "Params")
            .str(3, "p")
            .str(4, "Namespace")
            .str(5, "kube-system"),
    );
    let body = envelope(
        "networking.k8s.io/v1",
        "IngressClass",
        Enc::new().msg(1, meta("keelson")).msg(2, spec),
    );
    let got = decode(&body).unwrap();
    assert_eq!(
        got["spec"],
        json!({"controller": "keelson.dev/ingress",
               "parameters": {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p",
                              "scope": "Namespace", "namespace": "kube-system"}})
    );
}

#[test]
fn endpoint_slice_keeps_pointer_fields() {
    let endpoint = Enc::new()
        .str(1, "10.244.0.5")
        .msg(2, Enc::new().varint(1, 1).varint(2, 1).varint(3, 0))
        .msg(
            4,
            Enc::new().str(1, "Pod").str(2, "default").str(3, "web-0"),
        )
        .str(6, "node-a");
    let port = Enc::new().str(1, "").str(2, "TCP").varint(3, 8080);
    let body = envelope(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        Enc::new()
            .msg(
                1,
                meta("web-x").entry(11, "kubernetes.io/service-name", "web"),
            )
            .str(4, "IPv4")
            .msg(2, endpoint)
            .msg(3, port),
    );
    let got = decode(&body).unwrap();
    assert_eq!(got["addressType"], "IPv4");
    assert_eq!(
        got["endpoints"],
        json!([{"addresses": ["10.244.0.5"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0"},
                "nodeName": "node-a"}])
    );
    assert_eq!(
        got["ports"],
        json!([{"name": "", "protocol": "TCP", "port": 8080}])
    );
}

#[test]
fn lease_renders_micro_times() {
    let spec = Enc::new()
        .str(1, "node-a")
        .int(2, 40)
        .msg(3, Enc::new().int(1, 1_700_000_000).int(2, 123_456_000))
        .msg(4, Enc::new().int(1, 1_700_000_010).int(2, 0))
        .int(5, 0);
    let body = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        Enc::new().msg(1, meta("node-a")).msg(2, spec),
    );
    let got = decode(&body).unwrap();
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "node-a", "leaseDurationSeconds": 40,
               "acquireTime": "2023-11-14T22:13:20.123456Z",
               "renewTime": "2023-11-14T22:13:30.000000Z",
               "leaseTransitions": 0})
    );
}

#[test]
fn scale_and_delete_options() {
    let scale = Enc::new()
        .msg(1, meta("web"))
        .msg(2, Enc::new().int(1, 5))
        .msg(3, Enc::new().int(1, 2).str(2, "app=web"));
    let got = decode(&envelope("autoscaling/v1", "Scale", scale)).unwrap();
    assert_eq!(got["spec"], json!({"replicas": 5}));
    assert_eq!(got["status"], json!({"replicas": 2, "selector": "app=web"}));

    let options = Enc::new()
        .int(1, 0)
        .msg(2, Enc::new().str(1, "uid-1").str(2, "7"))
        .str(4, "Foreground")
        .str(5, "All");
    for api_version in ["v1", "meta.k8s.io/v1", "apps/v1"] {
        let got = decode(&envelope(api_version, "DeleteOptions", options.clone())).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": api_version, "kind": "DeleteOptions",
                   "gracePeriodSeconds": 0,
                   "preconditions": {"uid": "uid-1", "resourceVersion": "7"},
                   "propagationPolicy": "Foreground", "dryRun": ["All"]})
        );
    }
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let metadata = meta("x")
        .varint(99, 12345)
        .fixed32(98, 7)
        .fixed64(97, 8)
        .str(96, "future field")
        .msg(95, Enc::new().str(1, "nested"));
    let body = envelope("v1", "Namespace", Enc::new().msg(1, metadata).varint(50, 1));
    let got = decode(&body).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    );
}

#[test]
fn repeated_scalars_packed_or_not_and_negative_numbers() {
    // supplementalGroups as two unpacked values, then a packed run of two more.
    let packed = [3u8, 4]; // two one-byte varints
    let security = Enc::new()
        .int(4, 1)
        .int(4, 2)
        .bytes(4, &packed)
        .int(2, -1)
        .int(5, 2000);
    let spec = Enc::new()
        .msg(14, security)
        .int(25, -5)
        .msg(2, Enc::new().str(1, "c").str(2, "img"));
    let body = envelope("v1", "Pod", Enc::new().msg(1, meta("p")).msg(2, spec));
    let got = decode(&body).unwrap();
    assert_eq!(
        got["spec"]["securityContext"],
        json!({"supplementalGroups": [1, 2, 3, 4], "runAsUser": -1, "fsGroup": 2000})
    );
    assert_eq!(got["spec"]["priority"], -5);
}

#[test]
fn raw_json_inside_the_envelope_is_accepted() {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap"))
        .bytes(2, br#"{"metadata":{"name":"j"},"data":{"a":"b"}}"#)
        .str(4, "application/json");
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.finish());
    assert_eq!(
        decode(&body).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"a": "b"}})
    );
}
