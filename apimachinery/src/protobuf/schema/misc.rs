//! Small groups: autoscaling/v1 Scale, discovery.k8s.io/v1, coordination.k8s.io/v1.

use super::core::OBJECT_REFERENCE;
use super::meta::OBJECT_META;
use super::Kind::*;
use super::{list, ptr, val, Message};

pub static SCALE: Message = Message {
    name: "Scale",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&SCALE_SPEC)),
        val(3, "status", Msg(&SCALE_STATUS)),
    ],
};

static SCALE_SPEC: Message = Message {
    name: "ScaleSpec",
    fields: &[val(1, "replicas", Int32)],
};

static SCALE_STATUS: Message = Message {
    name: "ScaleStatus",
    fields: &[val(1, "replicas", Int32), val(2, "selector", Str)],
};

pub static ENDPOINT_SLICE: Message = Message {
    name: "EndpointSlice",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(4, "addressType", Str),
        list(2, "endpoints", Msg(&ENDPOINT)),
        list(3, "ports", Msg(&ENDPOINT_PORT)),
    ],
};

static ENDPOINT: Message = Message {
    name: "Endpoint",
    fields: &[
        list(1, "addresses", Str),
        val(2, "conditions", Msg(&ENDPOINT_CONDITIONS)),
        ptr(3, "hostname", Str),
        ptr(4, "targetRef", Msg(&OBJECT_REFERENCE)),
        val(5, "deprecatedTopology", StringMap),
        ptr(6, "nodeName", Str),
        ptr(7, "zone", Str),
        ptr(8, "hints", Msg(&ENDPOINT_HINTS)),
    ],
};

static ENDPOINT_CONDITIONS: Message = Message {
    name: "EndpointConditions",
    fields: &[
        ptr(1, "ready", Bool),
        ptr(2, "serving", Bool),
        ptr(3, "terminating", Bool),
    ],
};

static ENDPOINT_HINTS: Message = Message {
    name: "EndpointHints",
    fields: &[list(1, "forZones", Msg(&FOR_ZONE))],
};

static FOR_ZONE: Message = Message {
    name: "ForZone",
    fields: &[val(1, "name", Str)],
};

static ENDPOINT_PORT: Message = Message {
    name: "EndpointPort",
    fields: &[
        ptr(1, "name", Str),
        ptr(2, "protocol", Str),
        ptr(3, "port", Int32),
        ptr(4, "appProtocol", Str),
    ],
};

pub static LEASE: Message = Message {
    name: "Lease",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&LEASE_SPEC)),
    ],
};

static LEASE_SPEC: Message = Message {
    name: "LeaseSpec",
    fields: &[
        ptr(1, "holderIdentity", Str),
        ptr(2, "leaseDurationSeconds", Int32),
        ptr(3, "acquireTime", MicroTime),
        ptr(4, "renewTime", MicroTime),
        ptr(5, "leaseTransitions", Int32),
        ptr(6, "strategy", Str),
        ptr(7, "preferredHolder", Str),
    ],
};
