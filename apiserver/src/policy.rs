//! The default RBAC policy (`auth::policy`) written through the REST layer at start, as
//! kube-apiserver's RBAC post-start hook does: missing objects created, existing ones completed.

use crate::auth::policy::{objects, reconciled};
use crate::resources;
use crate::rest::{self, Api, Sub, Target};
use serde_json::Value;

/// Creates or completes every default object. Runs after the namespaces exist; failures are
/// logged (the server then serves with what is stored).
pub async fn reconcile(api: &Api) {
    for (kind, default) in objects() {
        let Some(res) = resources::by_kind(kind) else {
            continue;
        };
        let text = |p: &str| {
            default
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
        let target = Target {
            res,
            namespace: namespace.clone(),
            name: name.clone(),
        };
        let result = match api.store.get(&target.key()) {
            None => rest::create(api, res, &namespace, default, false)
                .await
                .map(|_| ()),
            Some(e) => match reconciled(&e.obj, &default) {
                Some(obj) => rest::update(api, &target, obj, Sub::Main, false)
                    .await
                    .map(|_| ()),
                None => Ok(()),
            },
        };
        if let Err(e) = result {
            tracing::warn!(kind, %name, error = %e.message, "reconciling the default RBAC policy failed");
        }
    }
}
