//! k8s.io/api/apps/v1, and batch/v1's Job and CronJob (pod templates too).

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

// batch/v1, as `kubectl create job` and `kubectl create cronjob` send them (status is the
// controllers').
message! { pub JOB = "Job" { 1 metadata Msg(OBJECT_META), 2 spec Msg(JOB_SPEC) }}

message! { JOB_SPEC = "JobSpec" {
    ptr 1 parallelism Int32, ptr 2 completions Int32, ptr 3 activeDeadlineSeconds Int64,
    ptr 4 selector Msg(LABEL_SELECTOR), ptr 5 manualSelector Bool, 6 template Msg(POD_TEMPLATE_SPEC),
    ptr 7 backoffLimit Int32, ptr 8 ttlSecondsAfterFinished Int32, ptr 9 completionMode,
    ptr 10 suspend Bool,
}}

message! { pub CRON_JOB = "CronJob" { 1 metadata Msg(OBJECT_META), 2 spec Msg(CRON_JOB_SPEC) }}

message! { CRON_JOB_SPEC = "CronJobSpec" {
    1 schedule, ptr 8 timeZone, ptr 2 startingDeadlineSeconds Int64, 3 concurrencyPolicy,
    ptr 4 suspend Bool, 5 jobTemplate Msg(JOB_TEMPLATE_SPEC), ptr 6 successfulJobsHistoryLimit Int32,
    ptr 7 failedJobsHistoryLimit Int32,
}}

message! { JOB_TEMPLATE_SPEC = "JobTemplateSpec" { 1 metadata Msg(OBJECT_META), 2 spec Msg(JOB_SPEC) }}
