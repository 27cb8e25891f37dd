//! The allocation records: one stored object per allocated ClusterIP or NodePort, under keys
//! of their own that no served resource uses. An address's record has the shape of upstream's
//! networking.k8s.io/v1 IPAddress (name = the address, spec.parentRef = the Service); a port's
//! the same shape.

use crate::object;
use serde_json::{json, Value};
use std::net::Ipv4Addr;

/// Where ClusterIP records live: `/allocations/serviceips/<ip>`.
pub const IP_PREFIX: &str = "/allocations/serviceips/";
/// Where NodePort records live: `/allocations/servicenodeports/<port>`.
pub const PORT_PREFIX: &str = "/allocations/servicenodeports/";

/// The Service an allocation belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub namespace: String,
    pub name: String,
}

impl Owner {
    pub fn of(svc: &Value) -> Owner {
        Owner {
            namespace: object::namespace(svc).to_string(),
            name: object::name(svc).to_string(),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

pub fn ip_key(ip: Ipv4Addr) -> String {
    format!("{IP_PREFIX}{ip}")
}

pub fn port_key(port: u16) -> String {
    format!("{PORT_PREFIX}{port}")
}

/// The record stored at `key` for `owner`.
pub(super) fn record(key: &str, name: &str, owner: &Owner) -> Value {
    let (api_version, kind) = match key.starts_with(IP_PREFIX) {
        true => ("networking.k8s.io/v1", "IPAddress"),
        false => ("v1", "ServiceNodePort"),
    };
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "name": name, "creationTimestamp": object::now_rfc3339() },
        "spec": { "parentRef": {
            "group": "", "resource": "services",
            "namespace": owner.namespace, "name": owner.name,
        } },
    })
}

/// The Service a record names.
pub fn owner_of(rec: &Value) -> Option<Owner> {
    let p = rec.pointer("/spec/parentRef")?;
    Some(Owner {
        namespace: p.get("namespace")?.as_str()?.to_string(),
        name: p.get("name")?.as_str()?.to_string(),
    })
}

/// Whether `obj` is a record the server can use at `key` (the store's load check): named as its
/// key says, of an address or port, naming its Service.
pub fn check_record(key: &str, obj: &Value) -> Result<(), String> {
    let (prefix, rest) = if let Some(rest) = key.strip_prefix(IP_PREFIX) {
        (IP_PREFIX, rest)
    } else if let Some(rest) = key.strip_prefix(PORT_PREFIX) {
        (PORT_PREFIX, rest)
    } else {
        return Err("no served resource or allocation is stored under this key".into());
    };
    let valid = match prefix {
        IP_PREFIX => rest.parse::<Ipv4Addr>().is_ok(),
        _ => rest.parse::<u16>().is_ok_and(|p| p > 0),
    };
    if !valid {
        return Err(format!("not an allocation record key: {rest:?}"));
    }
    if object::name(obj) != rest {
        return Err(format!("allocation record not named {rest}"));
    }
    owner_of(obj)
        .filter(|o| !o.name.is_empty())
        .map(drop)
        .ok_or_else(|| "allocation record without spec.parentRef namespace and name".into())
}

/// The record's creation time.
pub(super) fn created(rec: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    object::timestamp(rec.pointer("/metadata/creationTimestamp")?)
}
