//! Hand-written tables of the Kubernetes protobuf messages Keelson accepts.
//!
//! Field numbers are those of upstream's `generated.proto` files (k8s.io/api and
//! k8s.io/apimachinery); JSON names are those of the Go types' `json` tags, which differ from the
//! proto names in a few places (inlined structs, `aPIGroup`). Fields missing from a table are
//! skipped when decoding, so a table only has to list what Keelson cares about.
//!
//! A table reads like the .proto it mirrors, one `message!` per message:
//!
//! ```text
//! message! { pub NAME = "GoName" { [ptr|list] NUMBER jsonName [Kind], ... } }
//! ```
//!
//! with no `ptr`/`list` for a Go value field (see [`Card`]) and no Kind for a string; a message
//! kind names its table, as in `Msg(OBJECT_META)`.

macro_rules! message {
    ($vis:vis $name:ident = $go:literal {
        $($($card:ident)? $number:literal $json:ident $($kind:ident $(($inner:ident))?)?),* $(,)?
    }) => {
        $vis static $name: $crate::protobuf::schema::Message = $crate::protobuf::schema::Message {
            name: $go,
            fields: &[$($crate::protobuf::schema::Field {
                number: $number,
                json: stringify!($json),
                kind: field_kind!($($kind $(($inner))?)?),
                card: field_card!($($card)?),
            }),*],
        };
    };
}

macro_rules! field_kind {
    () => {
        $crate::protobuf::schema::Kind::Str
    };
    ($kind:ident) => {
        $crate::protobuf::schema::Kind::$kind
    };
    ($kind:ident($inner:ident)) => {
        $crate::protobuf::schema::Kind::$kind(&$inner)
    };
}

macro_rules! field_card {
    () => {
        $crate::protobuf::schema::Card::Value
    };
    (ptr) => {
        $crate::protobuf::schema::Card::Pointer
    };
    (list) => {
        $crate::protobuf::schema::Card::Repeated
    };
}

mod apps;
mod authentication;
mod authorization;
mod certificates;
mod core;
mod meta;
mod misc;
mod networking;
mod pod;
mod rbac;

/// How a field's value is encoded and turned into JSON.
#[derive(Clone, Copy)]
pub enum Kind {
    Str,
    /// `bytes`, written as base64 like Go's `[]byte`.
    Bytes,
    Int32,
    Int64,
    Bool,
    Msg(&'static Message),
    /// A Go struct embedded with `json:",inline"`: its fields land in the parent JSON object.
    Inline(&'static Message),
    /// `map<string, string>`: repeated entry messages with key = 1, value = 2.
    StringMap,
    /// `map<string, bytes>`, values written as base64 like Go's `[]byte`.
    BytesMap,
    /// `map<string, Quantity>`.
    QuantityMap,
    /// util/intstr.IntOrString {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}.
    IntOrString,
    /// api/resource.Quantity {string = 1}, written as its string.
    Quantity,
    /// meta/v1.Time {seconds = 1, nanos = 2}, written as RFC 3339 with whole seconds.
    Time,
    /// meta/v1.MicroTime, written as RFC 3339 with microseconds.
    MicroTime,
}

/// Whether a zero value survives into JSON.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Card {
    /// A Go value field: Go always sends it, and its zero value means "unset", so zero values
    /// (empty strings, 0, false, zero IntOrString, zero Time) are left out of the JSON.
    Value,
    /// A Go pointer field: only sent when set, so a zero value is meaningful and kept.
    Pointer,
    /// A repeated field, written as a JSON array.
    Repeated,
}

pub struct Field {
    pub number: u32,
    pub json: &'static str,
    pub kind: Kind,
    pub card: Card,
}

pub struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
}

impl Message {
    pub fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// The schema of a top-level object, by the apiVersion and kind of its runtime.Unknown envelope.
pub fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    Some(match (api_version, kind) {
        // Clients send DeleteOptions tagged with the resource's group version or meta.k8s.io/v1.
        (_, "DeleteOptions") => &meta::DELETE_OPTIONS,
        ("v1", "Namespace") => &core::NAMESPACE,
        ("v1", "ConfigMap") => &core::CONFIG_MAP,
        ("v1", "Secret") => &core::SECRET,
        ("v1", "ServiceAccount") => &core::SERVICE_ACCOUNT,
        ("v1", "Service") => &core::SERVICE,
        ("v1", "Pod") => &pod::POD,
        ("apps/v1", "Deployment") => &apps::DEPLOYMENT,
        ("apps/v1", "ReplicaSet") => &apps::REPLICA_SET,
        ("batch/v1", "Job") => &apps::JOB,
        ("batch/v1", "CronJob") => &apps::CRON_JOB,
        ("autoscaling/v1", "Scale") => &misc::SCALE,
        ("autoscaling/v1", "HorizontalPodAutoscaler") => &misc::HORIZONTAL_POD_AUTOSCALER,
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => &certificates::CSR,
        ("policy/v1", "Eviction") => &certificates::EVICTION,
        ("policy/v1", "PodDisruptionBudget") => &misc::POD_DISRUPTION_BUDGET,
        ("v1", "ResourceQuota") => &misc::RESOURCE_QUOTA,
        ("scheduling.k8s.io/v1", "PriorityClass") => &misc::PRIORITY_CLASS,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &certificates::SELF_SUBJECT_REVIEW,
        ("authentication.k8s.io/v1", "TokenRequest") => &authentication::TOKEN_REQUEST,
        ("authentication.k8s.io/v1", "TokenReview") => &authentication::TOKEN_REVIEW,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            &authorization::SELF_SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => &authorization::SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            &authorization::LOCAL_SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            &authorization::SELF_SUBJECT_RULES_REVIEW
        }
        ("rbac.authorization.k8s.io/v1", "Role") => &rbac::ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => &rbac::CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => &rbac::ROLE_BINDING,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => &rbac::CLUSTER_ROLE_BINDING,
        ("networking.k8s.io/v1", "Ingress") => &networking::INGRESS,
        ("networking.k8s.io/v1", "IngressClass") => &networking::INGRESS_CLASS,
        ("discovery.k8s.io/v1", "EndpointSlice") => &misc::ENDPOINT_SLICE,
        ("coordination.k8s.io/v1", "Lease") => &misc::LEASE,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message reachable from a served kind, each once.
    fn reachable(m: &'static Message, seen: &mut Vec<&'static str>) {
        if seen.contains(&m.name) {
            return;
        }
        seen.push(m.name);
        for f in m.fields {
            if let Kind::Msg(inner) | Kind::Inline(inner) = f.kind {
                reachable(inner, seen);
            }
        }
        let mut numbers: Vec<u32> = m.fields.iter().map(|f| f.number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            m.fields.len(),
            "{}: a field number twice",
            m.name
        );
    }

    #[test]
    fn tables_have_unique_field_numbers() {
        let mut seen = Vec::new();
        for (v, k) in [("v1", "Pod"), ("v1", "Service"), ("apps/v1", "Deployment")] {
            reachable(lookup(v, k).unwrap(), &mut seen);
        }
        assert!(seen.contains(&"ProbeHandler") && seen.contains(&"LabelSelector"));
        assert_eq!(
            lookup("v1", "Secret").unwrap().field(3).unwrap().json,
            "type"
        );
    }
}
