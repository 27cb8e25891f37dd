//! Small groups: autoscaling/v1 Scale and HorizontalPodAutoscaler (`kubectl autoscale`),
//! policy/v1 PodDisruptionBudget (`kubectl create pdb`), discovery.k8s.io/v1,
//! coordination.k8s.io/v1.

use super::core::OBJECT_REFERENCE;
use super::meta::{LABEL_SELECTOR, OBJECT_META};

message! { pub SCALE = "Scale" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(SCALE_SPEC), 3 status Msg(SCALE_STATUS),
}}

message! { SCALE_SPEC = "ScaleSpec" { 1 replicas Int32 }}

message! { SCALE_STATUS = "ScaleStatus" { 1 replicas Int32, 2 selector }}

message! { pub HORIZONTAL_POD_AUTOSCALER = "HorizontalPodAutoscaler" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(HPA_SPEC), 3 status Msg(HPA_STATUS),
}}

message! { HPA_SPEC = "HorizontalPodAutoscalerSpec" {
    1 scaleTargetRef Msg(CROSS_VERSION_OBJECT_REFERENCE), ptr 2 minReplicas Int32,
    3 maxReplicas Int32, ptr 4 targetCPUUtilizationPercentage Int32,
}}

message! { CROSS_VERSION_OBJECT_REFERENCE = "CrossVersionObjectReference" {
    1 kind, 2 name, 3 apiVersion,
}}

message! { HPA_STATUS = "HorizontalPodAutoscalerStatus" {
    ptr 1 observedGeneration Int64, ptr 2 lastScaleTime Time, 3 currentReplicas Int32,
    4 desiredReplicas Int32, ptr 5 currentCPUUtilizationPercentage Int32,
}}

// What `kubectl create pdb` sends: metadata and spec (the status is the controller's).
message! { pub POD_DISRUPTION_BUDGET = "PodDisruptionBudget" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(PDB_SPEC),
}}

message! { PDB_SPEC = "PodDisruptionBudgetSpec" {
    ptr 1 minAvailable IntOrString, ptr 2 selector Msg(LABEL_SELECTOR),
    ptr 3 maxUnavailable IntOrString, ptr 4 unhealthyPodEvictionPolicy,
}}

// `kubectl create quota` and `kubectl create priorityclass`.
message! { pub RESOURCE_QUOTA = "ResourceQuota" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(RESOURCE_QUOTA_SPEC),
}}

message! { RESOURCE_QUOTA_SPEC = "ResourceQuotaSpec" {
    1 hard QuantityMap, list 2 scopes, ptr 3 scopeSelector Msg(SCOPE_SELECTOR),
}}

message! { SCOPE_SELECTOR = "ScopeSelector" { list 1 matchExpressions Msg(SCOPE_REQUIREMENT) }}

message! { SCOPE_REQUIREMENT = "ScopedResourceSelectorRequirement" {
    1 scopeName, 2 operator, list 3 values,
}}

message! { pub PRIORITY_CLASS = "PriorityClass" {
    1 metadata Msg(OBJECT_META), 2 value Int32, 3 globalDefault Bool, 4 description,
    ptr 5 preemptionPolicy,
}}

message! { pub ENDPOINT_SLICE = "EndpointSlice" {
    1 metadata Msg(OBJECT_META), 4 addressType, list 2 endpoints Msg(ENDPOINT),
    list 3 ports Msg(ENDPOINT_PORT),
}}

message! { ENDPOINT = "Endpoint" {
    list 1 addresses, 2 conditions Msg(ENDPOINT_CONDITIONS), ptr 3 hostname,
    ptr 4 targetRef Msg(OBJECT_REFERENCE), 5 deprecatedTopology StringMap, ptr 6 nodeName,
    ptr 7 zone, ptr 8 hints Msg(ENDPOINT_HINTS),
}}

message! { ENDPOINT_CONDITIONS = "EndpointConditions" {
    ptr 1 ready Bool, ptr 2 serving Bool, ptr 3 terminating Bool,
}}

message! { ENDPOINT_HINTS = "EndpointHints" { list 1 forZones Msg(FOR_ZONE) }}

message! { FOR_ZONE = "ForZone" { 1 name }}

message! { ENDPOINT_PORT = "EndpointPort" {
    ptr 1 name, ptr 2 protocol, ptr 3 port Int32, ptr 4 appProtocol,
}}

message! { pub LEASE = "Lease" { 1 metadata Msg(OBJECT_META), 2 spec Msg(LEASE_SPEC) }}

message! { LEASE_SPEC = "LeaseSpec" {
    ptr 1 holderIdentity, ptr 2 leaseDurationSeconds Int32, ptr 3 acquireTime MicroTime,
    ptr 4 renewTime MicroTime, ptr 5 leaseTransitions Int32, ptr 6 strategy, ptr 7 preferredHolder,
}}
