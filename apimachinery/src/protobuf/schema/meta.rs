//! k8s.io/apimachinery/pkg/apis/meta/v1.

use super::Kind::*;
use super::{list, ptr, val, Message};

pub static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        val(1, "name", Str),
        val(2, "generateName", Str),
        val(3, "namespace", Str),
        val(4, "selfLink", Str),
        val(5, "uid", Str),
        val(6, "resourceVersion", Str),
        val(7, "generation", Int64),
        val(8, "creationTimestamp", Time),
        ptr(9, "deletionTimestamp", Time),
        ptr(10, "deletionGracePeriodSeconds", Int64),
        val(11, "labels", StringMap),
        val(12, "annotations", StringMap),
        list(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        list(14, "finalizers", Str),
        // 17 managedFields is server-maintained; clients' values are not decoded.
    ],
};

pub static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        val(5, "apiVersion", Str),
        val(1, "kind", Str),
        val(3, "name", Str),
        val(4, "uid", Str),
        ptr(6, "controller", Bool),
        ptr(7, "blockOwnerDeletion", Bool),
    ],
};

pub static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        val(1, "matchLabels", StringMap),
        list(2, "matchExpressions", Msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

pub static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        val(1, "key", Str),
        val(2, "operator", Str),
        list(3, "values", Str),
    ],
};

pub static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        ptr(1, "gracePeriodSeconds", Int64),
        ptr(2, "preconditions", Msg(&PRECONDITIONS)),
        ptr(3, "orphanDependents", Bool),
        ptr(4, "propagationPolicy", Str),
        list(5, "dryRun", Str),
    ],
};

pub static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[ptr(1, "uid", Str), ptr(2, "resourceVersion", Str)],
};
