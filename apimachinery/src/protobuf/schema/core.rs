//! k8s.io/api/core/v1: everything but the pod types (see `pod.rs`).

use super::meta::OBJECT_META;
use super::Kind::*;
use super::{list, ptr, val, Message};

pub static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&NAMESPACE_SPEC)),
        val(3, "status", Msg(&NAMESPACE_STATUS)),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[list(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[val(1, "phase", Str)],
};

pub static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        ptr(4, "immutable", Bool),
        val(2, "data", StringMap),
        val(3, "binaryData", BytesMap),
    ],
};

pub static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        ptr(5, "immutable", Bool),
        val(2, "data", BytesMap),
        val(4, "stringData", StringMap),
        val(3, "type", Str),
    ],
};

pub static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        list(2, "secrets", Msg(&OBJECT_REFERENCE)),
        list(3, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        ptr(4, "automountServiceAccountToken", Bool),
    ],
};

pub static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        val(1, "kind", Str),
        val(2, "namespace", Str),
        val(3, "name", Str),
        val(4, "uid", Str),
        val(5, "apiVersion", Str),
        val(6, "resourceVersion", Str),
        val(7, "fieldPath", Str),
    ],
};

pub static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[val(1, "name", Str)],
};

pub static TYPED_LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "TypedLocalObjectReference",
    fields: &[
        ptr(1, "apiGroup", Str),
        val(2, "kind", Str),
        val(3, "name", Str),
    ],
};

pub static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&SERVICE_SPEC)),
        val(3, "status", Msg(&SERVICE_STATUS)),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        list(1, "ports", Msg(&SERVICE_PORT)),
        val(2, "selector", StringMap),
        val(3, "clusterIP", Str),
        list(18, "clusterIPs", Str),
        val(4, "type", Str),
        list(5, "externalIPs", Str),
        val(7, "sessionAffinity", Str),
        val(8, "loadBalancerIP", Str),
        list(9, "loadBalancerSourceRanges", Str),
        val(10, "externalName", Str),
        val(11, "externalTrafficPolicy", Str),
        val(12, "healthCheckNodePort", Int32),
        val(13, "publishNotReadyAddresses", Bool),
        ptr(14, "sessionAffinityConfig", Msg(&SESSION_AFFINITY_CONFIG)),
        list(19, "ipFamilies", Str),
        ptr(17, "ipFamilyPolicy", Str),
        ptr(20, "allocateLoadBalancerNodePorts", Bool),
        ptr(21, "loadBalancerClass", Str),
        ptr(22, "internalTrafficPolicy", Str),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        val(1, "name", Str),
        val(2, "protocol", Str),
        ptr(6, "appProtocol", Str),
        val(3, "port", Int32),
        val(4, "targetPort", IntOrString),
        val(5, "nodePort", Int32),
    ],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[ptr(1, "clientIP", Msg(&CLIENT_IP_CONFIG))],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[ptr(1, "timeoutSeconds", Int32)],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[val(1, "loadBalancer", Msg(&LOAD_BALANCER_STATUS))],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[list(1, "ingress", Msg(&LOAD_BALANCER_INGRESS))],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[val(1, "ip", Str), val(2, "hostname", Str)],
};
