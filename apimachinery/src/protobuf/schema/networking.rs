//! k8s.io/api/networking/v1.

use super::core::TYPED_LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;

message! { pub INGRESS = "Ingress" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(INGRESS_SPEC), 3 status Msg(INGRESS_STATUS),
}}

message! { INGRESS_SPEC = "IngressSpec" {
    ptr 4 ingressClassName, ptr 1 defaultBackend Msg(INGRESS_BACKEND), list 2 tls Msg(INGRESS_TLS),
    list 3 rules Msg(INGRESS_RULE),
}}

message! { INGRESS_BACKEND = "IngressBackend" {
    ptr 4 service Msg(INGRESS_SERVICE_BACKEND), ptr 3 resource Msg(TYPED_LOCAL_OBJECT_REFERENCE),
}}

message! { INGRESS_SERVICE_BACKEND = "IngressServiceBackend" {
    1 name, 2 port Msg(SERVICE_BACKEND_PORT),
}}

message! { SERVICE_BACKEND_PORT = "ServiceBackendPort" { 1 name, 2 number Int32 }}

message! { INGRESS_TLS = "IngressTLS" { list 1 hosts, 2 secretName }}

message! { INGRESS_RULE = "IngressRule" {
    1 host,
    // Go embeds IngressRuleValue with `json:",inline"`, so `http` sits on the rule itself.
    2 ingressRuleValue Inline(INGRESS_RULE_VALUE),
}}

message! { INGRESS_RULE_VALUE = "IngressRuleValue" { ptr 1 http Msg(HTTP_INGRESS_RULE_VALUE) }}

message! { HTTP_INGRESS_RULE_VALUE = "HTTPIngressRuleValue" {
    list 1 paths Msg(HTTP_INGRESS_PATH),
}}

message! { HTTP_INGRESS_PATH = "HTTPIngressPath" {
    1 path, ptr 3 pathType, 2 backend Msg(INGRESS_BACKEND),
}}

message! { INGRESS_STATUS = "IngressStatus" { 1 loadBalancer Msg(INGRESS_LOAD_BALANCER_STATUS) }}

message! { INGRESS_LOAD_BALANCER_STATUS = "IngressLoadBalancerStatus" {
    list 1 ingress Msg(INGRESS_LOAD_BALANCER_INGRESS),
}}

message! { INGRESS_LOAD_BALANCER_INGRESS = "IngressLoadBalancerIngress" { 1 ip, 2 hostname }}

message! { pub INGRESS_CLASS = "IngressClass" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(INGRESS_CLASS_SPEC),
}}

message! { INGRESS_CLASS_SPEC = "IngressClassSpec" {
    1 controller, ptr 2 parameters Msg(INGRESS_CLASS_PARAMETERS_REFERENCE),
}}

message! { INGRESS_CLASS_PARAMETERS_REFERENCE = "IngressClassParametersReference" {
    // The proto field is spelled `aPIGroup`; the JSON tag is `apiGroup`.
    ptr 1 apiGroup, 2 kind, 3 name, ptr 4 scope, ptr 5 namespace,
}}
