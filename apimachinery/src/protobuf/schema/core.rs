//! k8s.io/api/core/v1: everything but the pod types (see `pod.rs`).

use super::meta::OBJECT_META;

message! { pub NAMESPACE = "Namespace" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(NAMESPACE_SPEC), 3 status Msg(NAMESPACE_STATUS),
}}

message! { NAMESPACE_SPEC = "NamespaceSpec" { list 1 finalizers }}

message! { NAMESPACE_STATUS = "NamespaceStatus" { 1 phase }}

message! { pub CONFIG_MAP = "ConfigMap" {
    1 metadata Msg(OBJECT_META), ptr 4 immutable Bool, 2 data StringMap, 3 binaryData BytesMap,
}}

message! { pub SECRET = "Secret" {
    1 metadata Msg(OBJECT_META), ptr 5 immutable Bool, 2 data BytesMap, 4 stringData StringMap,
    3 type,
}}

message! { pub SERVICE_ACCOUNT = "ServiceAccount" {
    1 metadata Msg(OBJECT_META), list 2 secrets Msg(OBJECT_REFERENCE),
    list 3 imagePullSecrets Msg(LOCAL_OBJECT_REFERENCE), ptr 4 automountServiceAccountToken Bool,
}}

message! { pub OBJECT_REFERENCE = "ObjectReference" {
    1 kind, 2 namespace, 3 name, 4 uid, 5 apiVersion, 6 resourceVersion, 7 fieldPath,
}}

message! { pub LOCAL_OBJECT_REFERENCE = "LocalObjectReference" { 1 name }}

message! { pub TYPED_LOCAL_OBJECT_REFERENCE = "TypedLocalObjectReference" {
    ptr 1 apiGroup, 2 kind, 3 name,
}}

message! { pub SERVICE = "Service" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(SERVICE_SPEC), 3 status Msg(SERVICE_STATUS),
}}

message! { SERVICE_SPEC = "ServiceSpec" {
    list 1 ports Msg(SERVICE_PORT), 2 selector StringMap, 3 clusterIP, list 18 clusterIPs, 4 type,
    list 5 externalIPs, 7 sessionAffinity, 8 loadBalancerIP, list 9 loadBalancerSourceRanges,
    10 externalName, 11 externalTrafficPolicy, 12 healthCheckNodePort Int32,
    13 publishNotReadyAddresses Bool, ptr 14 sessionAffinityConfig Msg(SESSION_AFFINITY_CONFIG),
    list 19 ipFamilies, ptr 17 ipFamilyPolicy, ptr 20 allocateLoadBalancerNodePorts Bool,
    ptr 21 loadBalancerClass, ptr 22 internalTrafficPolicy,
}}

message! { SERVICE_PORT = "ServicePort" {
    1 name, 2 protocol, ptr 6 appProtocol, 3 port Int32, 4 targetPort IntOrString, 5 nodePort Int32,
}}

message! { SESSION_AFFINITY_CONFIG = "SessionAffinityConfig" {
    ptr 1 clientIP Msg(CLIENT_IP_CONFIG),
}}

message! { CLIENT_IP_CONFIG = "ClientIPConfig" { ptr 1 timeoutSeconds Int32 }}

message! { SERVICE_STATUS = "ServiceStatus" { 1 loadBalancer Msg(LOAD_BALANCER_STATUS) }}

message! { LOAD_BALANCER_STATUS = "LoadBalancerStatus" {
    list 1 ingress Msg(LOAD_BALANCER_INGRESS),
}}

message! { LOAD_BALANCER_INGRESS = "LoadBalancerIngress" { 1 ip, 2 hostname }}
