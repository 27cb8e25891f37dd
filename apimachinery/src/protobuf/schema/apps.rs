//! k8s.io/api/apps/v1.

use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::pod::POD_TEMPLATE_SPEC;

message! { pub DEPLOYMENT = "Deployment" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(DEPLOYMENT_SPEC), 3 status Msg(DEPLOYMENT_STATUS),
}}

message! { DEPLOYMENT_SPEC = "DeploymentSpec" {
    ptr 1 replicas Int32, ptr 2 selector Msg(LABEL_SELECTOR), 3 template Msg(POD_TEMPLATE_SPEC),
    4 strategy Msg(DEPLOYMENT_STRATEGY), 5 minReadySeconds Int32, ptr 6 revisionHistoryLimit Int32,
    7 paused Bool, ptr 9 progressDeadlineSeconds Int32,
}}

message! { DEPLOYMENT_STRATEGY = "DeploymentStrategy" {
    1 type, ptr 2 rollingUpdate Msg(ROLLING_UPDATE_DEPLOYMENT),
}}

message! { ROLLING_UPDATE_DEPLOYMENT = "RollingUpdateDeployment" {
    ptr 1 maxUnavailable IntOrString, ptr 2 maxSurge IntOrString,
}}

message! { DEPLOYMENT_STATUS = "DeploymentStatus" {
    1 observedGeneration Int64, 2 replicas Int32, 3 updatedReplicas Int32, 7 readyReplicas Int32,
    4 availableReplicas Int32, 5 unavailableReplicas Int32, ptr 8 collisionCount Int32,
}}

message! { pub REPLICA_SET = "ReplicaSet" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(REPLICA_SET_SPEC), 3 status Msg(REPLICA_SET_STATUS),
}}

message! { REPLICA_SET_SPEC = "ReplicaSetSpec" {
    ptr 1 replicas Int32, 4 minReadySeconds Int32, ptr 2 selector Msg(LABEL_SELECTOR),
    3 template Msg(POD_TEMPLATE_SPEC),
}}

message! { REPLICA_SET_STATUS = "ReplicaSetStatus" {
    1 replicas Int32, 2 fullyLabeledReplicas Int32, 4 readyReplicas Int32,
    5 availableReplicas Int32, 3 observedGeneration Int64,
}}
