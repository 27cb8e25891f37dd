//! Hand-written tables of the Kubernetes protobuf messages Keelson accepts.
//!
//! Field numbers are those of upstream's `generated.proto` files (k8s.io/api and
//! k8s.io/apimachinery); JSON names are those of the Go types' `json` tags, which differ from the
//! proto names in a few places (inlined structs, `aPIGroup`). Fields missing from a table are
//! skipped when decoding, so a table only has to list what Keelson cares about.

mod apps;
mod core;
mod meta;
mod misc;
mod networking;
mod pod;

/// How a field's value is encoded and turned into JSON.
#[derive(Clone, Copy)]
pub enum Kind {
    Str,
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

pub const fn val(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        card: Card::Value,
    }
}

pub const fn ptr(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        card: Card::Pointer,
    }
}

pub const fn list(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        card: Card::Repeated,
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
        ("autoscaling/v1", "Scale") => &misc::SCALE,
        ("networking.k8s.io/v1", "Ingress") => &networking::INGRESS,
        ("networking.k8s.io/v1", "IngressClass") => &networking::INGRESS_CLASS,
        ("discovery.k8s.io/v1", "EndpointSlice") => &misc::ENDPOINT_SLICE,
        ("coordination.k8s.io/v1", "Lease") => &misc::LEASE,
        _ => return None,
    })
}
