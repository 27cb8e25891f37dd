//! The generic REST storage: create, update, patch, delete, get, list and watch for every
//! served kind, with the per-kind steps (initial status, Services' ClusterIPs and NodePorts,
//! Pods' graceful deletion, ...).

pub mod admission;
pub mod certificates;
mod create;
pub mod custom;
mod delete;
mod disruption;
mod expiry;
mod initial_status;
pub mod podsecurity;
mod read;
mod service_account_admission;
mod service_allocation;
mod subresources;
pub mod token_request;
mod update;
mod watch;

pub use create::create;
pub use delete::propagation::release_foreground_owners;
pub use delete::{delete, delete_collection, DeleteOptions};
pub use expiry::expire_events;
pub use read::{get, list, Filter, ListParams};

/// Whether a GET of a collection asks for a watch.
pub fn read_is_watch(p: &ListParams) -> bool {
    read::is_true(&p.watch)
}
pub use subresources::{bind, evict, get_scale, update_scale};
pub use update::{patch, update};
pub use watch::watch;

/// Which part of the object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
    /// A CertificateSigningRequest's approval conditions.
    Approval,
    /// pods/binding: spec and status in one write, as upstream's binding sets nodeName and
    /// the PodScheduled condition together (one resourceVersion, one watch event).
    Binding,
    /// pods/ephemeralcontainers: only `spec.ephemeralContainers` is taken from the write.
    EphemeralContainers,
}

use crate::allocators::Allocators;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Store, StoreError};

/// What the REST layer needs: the store, the allocators and the admission plugins' settings.
pub struct Api {
    pub store: Store,
    pub alloc: Allocators,
    pub admission: admission::Admission,
}

/// Names the object a request is about.
#[derive(Debug, Clone)]
pub struct Target {
    pub res: &'static Resource,
    /// "" for cluster-scoped resources or all namespaces.
    pub namespace: String,
    pub name: String,
}

impl Target {
    pub fn key(&self) -> String {
        self.res.key(&self.namespace, &self.name)
    }

    pub fn not_found(&self) -> ApiError {
        ApiError::not_found(self.res.group, self.res.plural, &self.name)
    }
}

impl Api {
    /// A stored core/v1 object by plural, namespace and name.
    pub fn stored(&self, plural: &str, ns: &str, name: &str) -> Option<serde_json::Value> {
        let res = crate::resources::lookup("", "v1", plural)?;
        self.store.get(&res.key(ns, name)).map(|e| (*e.obj).clone())
    }

    pub fn get_entry(&self, t: &Target) -> ApiResult<Entry> {
        self.store.get(&t.key()).ok_or_else(|| t.not_found())
    }

    /// Namespaced writes need their namespace to exist (and not be terminating for creates).
    pub fn check_namespace(&self, ns: &str, creating: bool) -> ApiResult<()> {
        let Some(nsres) = crate::resources::lookup("", "v1", "namespaces") else {
            return Ok(());
        };
        match self.store.get(&nsres.key("", ns)) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(e) if creating && crate::object::is_deleting(&e.obj) => Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// 422 Invalid naming every cause (upstream's field errors), or Ok when there is none.
pub(crate) fn refuse_invalid(
    res: &Resource,
    obj: &serde_json::Value,
    causes: &[keelson_apiserver_registry::Cause],
) -> ApiResult<()> {
    match causes.is_empty() {
        true => Ok(()),
        false => Err(ApiError::invalid(
            res.kind,
            res.group,
            crate::object::name(obj),
            causes,
        )),
    }
}

/// Maps a store error on a named object to the Status a client expects.
pub fn store_error(t: &Target, e: StoreError) -> ApiError {
    match e {
        StoreError::AlreadyExists => ApiError::already_exists(t.res.group, t.res.plural, &t.name),
        StoreError::NotFound => t.not_found(),
        StoreError::Conflict { .. } => ApiError::conflict(t.res.group, t.res.plural, &t.name),
        StoreError::Unavailable(why) => ApiError::unavailable(why),
        other => ApiError::internal(other.to_string()),
    }
}
