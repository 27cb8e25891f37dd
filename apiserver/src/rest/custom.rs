//! The API server's side of CustomResourceDefinitions: the stored definitions put in effect
//! (their resources routed, listed in discovery, their schemas applied), kept current with the
//! store (another API server's write included), the definition's status as upstream's
//! controllers set it (names accepted, Established), and a deleted definition's objects deleted.

use super::Api;
use crate::object;
use crate::resources::Resource;
use crate::status::ApiResult;
use crate::store::{Precondition, Store, Write};
use keelson_apiserver_registry::custom::{self, cel, schema};
use serde_json::{json, Value};
use std::time::Duration;

const PREFIX: &str = "/apiextensions.k8s.io/customresourcedefinitions/";

/// A digest of what is stored: the definitions' keys and revisions.
fn stored(store: &Store) -> (Vec<Value>, Vec<(u64, String)>) {
    let (entries, _) = store.list_keyed(PREFIX);
    let seen = entries.iter().map(|(k, e)| (e.rev, k.clone())).collect();
    (
        entries.iter().map(|(_, e)| (*e.obj).clone()).collect(),
        seen,
    )
}

/// Loads the stored definitions, then follows those other API servers write (shared etcd),
/// once a second.
pub fn keep_up(store: Store) {
    custom::load(&definitions(&store));
    tokio::spawn(async move {
        let mut last = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let (crds, seen) = stored(&store);
            if seen != last {
                custom::load(&crds);
                last = seen;
            }
        }
    });
}

/// Prunes, defaults and validates a custom object against its version's schema and its CEL
/// rules (`old` is the stored object on update, for transition rules).
pub fn admit(res: &Resource, obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let Some(def) = custom::definition(res) else {
        return Ok(());
    };
    let Some(version) = def.version(res.version) else {
        return Ok(());
    };
    schema::prune(obj, &version.schema);
    schema::default(obj, &version.schema);
    let mut causes = schema::validate(obj, &version.schema);
    // Rules are evaluated on well-typed objects only, as upstream.
    if causes.is_empty() {
        causes = cel::validate(obj, old, &version.schema);
    }
    super::refuse_invalid(res, obj, &causes)
}

/// A definition's status as upstream's naming and establishing controllers leave it: its
/// names accepted, NamesAccepted and Established true, the storage version recorded.
pub fn definition_status(crd: &mut Value) {
    let now = object::now_rfc3339();
    let since = |t: &str| {
        crd.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == t && c["status"] == "True"))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now))
    };
    let conditions = json!([
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": since("Established")},
    ]);
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .and_then(|v| v.get("name").cloned());
    if let Some(s) = storage.filter(|s| !stored.contains(s)) {
        stored.push(s);
    }
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    object::set_path(
        crd,
        &["status"],
        json!({
            "acceptedNames": names, "conditions": conditions, "storedVersions": stored,
        }),
    );
}

/// The stored definitions.
pub fn definitions(store: &Store) -> Vec<Value> {
    stored(store).0
}

/// After a write to definitions: the ones gone take their objects with them (upstream's
/// customresourcecleanup finalizer), and what is stored is put in effect at once, so the next
/// request may use a definition just made.
pub async fn after_write(api: &Api, before: &[Value]) {
    let now = definitions(&api.store);
    for old in before {
        if !now.iter().any(|c| object::name(c) == object::name(old)) {
            delete_objects(api, old).await;
        }
    }
    custom::load(&now);
}

async fn delete_objects(api: &Api, crd: &Value) {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    if group.is_empty() || plural.is_empty() {
        return;
    }
    let (objects, _) = api.store.list_keyed(&format!("/{group}/{plural}/"));
    for (key, e) in objects {
        let w = Write {
            key,
            value: None,
            precondition: Precondition::Rev(e.rev),
        };
        if let Err(e) = api.store.write(w).await {
            tracing::warn!(error = %e, group, plural, "deleting a custom object of a deleted definition failed");
        }
    }
}
