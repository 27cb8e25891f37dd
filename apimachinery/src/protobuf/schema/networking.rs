//! k8s.io/api/networking/v1.

use super::core::TYPED_LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;
use super::Kind::*;
use super::{list, ptr, val, Message};

pub static INGRESS: Message = Message {
    name: "Ingress",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&INGRESS_SPEC)),
        val(3, "status", Msg(&INGRESS_STATUS)),
    ],
};

static INGRESS_SPEC: Message = Message {
    name: "IngressSpec",
    fields: &[
        ptr(4, "ingressClassName", Str),
        ptr(1, "defaultBackend", Msg(&INGRESS_BACKEND)),
        list(2, "tls", Msg(&INGRESS_TLS)),
        list(3, "rules", Msg(&INGRESS_RULE)),
    ],
};

static INGRESS_BACKEND: Message = Message {
    name: "IngressBackend",
    fields: &[
        ptr(4, "service", Msg(&INGRESS_SERVICE_BACKEND)),
        ptr(3, "resource", Msg(&TYPED_LOCAL_OBJECT_REFERENCE)),
    ],
};

static INGRESS_SERVICE_BACKEND: Message = Message {
    name: "IngressServiceBackend",
    fields: &[
        val(1, "name", Str),
        val(2, "port", Msg(&SERVICE_BACKEND_PORT)),
    ],
};

static SERVICE_BACKEND_PORT: Message = Message {
    name: "ServiceBackendPort",
    fields: &[val(1, "name", Str), val(2, "number", Int32)],
};

static INGRESS_TLS: Message = Message {
    name: "IngressTLS",
    fields: &[list(1, "hosts", Str), val(2, "secretName", Str)],
};

static INGRESS_RULE: Message = Message {
    name: "IngressRule",
    fields: &[
        val(1, "host", Str),
        // Go embeds IngressRuleValue with `json:",inline"`, so `http` sits on the rule itself.
        val(2, "ingressRuleValue", Inline(&INGRESS_RULE_VALUE)),
    ],
};

static INGRESS_RULE_VALUE: Message = Message {
    name: "IngressRuleValue",
    fields: &[ptr(1, "http", Msg(&HTTP_INGRESS_RULE_VALUE))],
};

static HTTP_INGRESS_RULE_VALUE: Message = Message {
    name: "HTTPIngressRuleValue",
    fields: &[list(1, "paths", Msg(&HTTP_INGRESS_PATH))],
};

static HTTP_INGRESS_PATH: Message = Message {
    name: "HTTPIngressPath",
    fields: &[
        val(1, "path", Str),
        ptr(3, "pathType", Str),
        val(2, "backend", Msg(&INGRESS_BACKEND)),
    ],
};

static INGRESS_STATUS: Message = Message {
    name: "IngressStatus",
    fields: &[val(1, "loadBalancer", Msg(&INGRESS_LOAD_BALANCER_STATUS))],
};

static INGRESS_LOAD_BALANCER_STATUS: Message = Message {
    name: "IngressLoadBalancerStatus",
    fields: &[list(1, "ingress", Msg(&INGRESS_LOAD_BALANCER_INGRESS))],
};

static INGRESS_LOAD_BALANCER_INGRESS: Message = Message {
    name: "IngressLoadBalancerIngress",
    fields: &[val(1, "ip", Str), val(2, "hostname", Str)],
};

pub static INGRESS_CLASS: Message = Message {
    name: "IngressClass",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&INGRESS_CLASS_SPEC)),
    ],
};

static INGRESS_CLASS_SPEC: Message = Message {
    name: "IngressClassSpec",
    fields: &[
        val(1, "controller", Str),
        ptr(2, "parameters", Msg(&INGRESS_CLASS_PARAMETERS_REFERENCE)),
    ],
};

static INGRESS_CLASS_PARAMETERS_REFERENCE: Message = Message {
    name: "IngressClassParametersReference",
    fields: &[
        // The proto field is spelled `aPIGroup`; the JSON tag is `apiGroup`.
        ptr(1, "apiGroup", Str),
        val(2, "kind", Str),
        val(3, "name", Str),
        ptr(4, "scope", Str),
        ptr(5, "namespace", Str),
    ],
};
