//! k8s.io/api/apps/v1.

use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::pod::POD_TEMPLATE_SPEC;
use super::Kind::*;
use super::{ptr, val, Message};

pub static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        val(3, "status", Msg(&DEPLOYMENT_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        ptr(1, "replicas", Int32),
        ptr(2, "selector", Msg(&LABEL_SELECTOR)),
        val(3, "template", Msg(&POD_TEMPLATE_SPEC)),
        val(4, "strategy", Msg(&DEPLOYMENT_STRATEGY)),
        val(5, "minReadySeconds", Int32),
        ptr(6, "revisionHistoryLimit", Int32),
        val(7, "paused", Bool),
        ptr(9, "progressDeadlineSeconds", Int32),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        val(1, "type", Str),
        ptr(2, "rollingUpdate", Msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        ptr(1, "maxUnavailable", IntOrString),
        ptr(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        val(1, "observedGeneration", Int64),
        val(2, "replicas", Int32),
        val(3, "updatedReplicas", Int32),
        val(7, "readyReplicas", Int32),
        val(4, "availableReplicas", Int32),
        val(5, "unavailableReplicas", Int32),
        ptr(8, "collisionCount", Int32),
    ],
};

pub static REPLICA_SET: Message = Message {
    name: "ReplicaSet",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&REPLICA_SET_SPEC)),
        val(3, "status", Msg(&REPLICA_SET_STATUS)),
    ],
};

static REPLICA_SET_SPEC: Message = Message {
    name: "ReplicaSetSpec",
    fields: &[
        ptr(1, "replicas", Int32),
        val(4, "minReadySeconds", Int32),
        ptr(2, "selector", Msg(&LABEL_SELECTOR)),
        val(3, "template", Msg(&POD_TEMPLATE_SPEC)),
    ],
};

static REPLICA_SET_STATUS: Message = Message {
    name: "ReplicaSetStatus",
    fields: &[
        val(1, "replicas", Int32),
        val(2, "fullyLabeledReplicas", Int32),
        val(4, "readyReplicas", Int32),
        val(5, "availableReplicas", Int32),
        val(3, "observedGeneration", Int64),
    ],
};
