//! An operator written the way kube-rs users write one, kept as Keelson's proof that such
//! operators run against it unchanged: a `Greeting` custom resource (the CustomResource derive
//! makes its CustomResourceDefinition, schema included), and a kube-runtime controller that
//! keeps one ConfigMap per Greeting (owned by it, so deleting the Greeting deletes it) and
//! reports progress in the Greeting's status subresource.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What a Greeting asks for: a message, said `times` times.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.keelson.dev",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    shortname = "gr",
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".spec.message"}"#,
    printcolumn = r#"{"name": "Written", "type": "boolean", "jsonPath": ".status.written"}"#
)]
pub struct GreetingSpec {
    pub message: String,
    #[serde(default = "one")]
    pub times: u32,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct GreetingStatus {
    pub written: bool,
    pub config_map: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The ConfigMap a Greeting wants: its message repeated, owned by the Greeting.
pub fn desired(g: &Greeting) -> ConfigMap {
    let text = vec![g.spec.message.as_str(); g.spec.times as usize].join("\n");
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{}-greeting", g.name_any())),
            owner_references: g.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("greeting".to_string(), text)])),
        ..Default::default()
    }
}

async fn reconcile(g: Arc<Greeting>, client: Arc<kube::Client>) -> Result<Action, Error> {
    let ns = g.namespace().unwrap_or_default();
    let cm = desired(&g);
    let name = cm.metadata.name.clone().unwrap_or_default();
    let params = PatchParams::apply("greeting-operator").force();
    Api::<ConfigMap>::namespaced((*client).clone(), &ns)
        .patch(&name, &params, &Patch::Apply(&cm))
        .await?;
    let status = serde_json::json!({
        "apiVersion": "example.keelson.dev/v1", "kind": "Greeting",
        "status": GreetingStatus { written: true, config_map: Some(name) },
    });
    Api::<Greeting>::namespaced((*client).clone(), &ns)
        .patch_status(&g.name_any(), &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_: Arc<Greeting>, e: &Error, _: Arc<kube::Client>) -> Action {
    tracing::warn!(error = %e, "reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

/// Runs the controller until `stop` resolves.
pub async fn run(
    client: kube::Client,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let greetings = Api::<Greeting>::all(client.clone());
    let config_maps = Api::<ConfigMap>::all(client.clone());
    Controller::new(greetings, watcher::Config::default())
        .owns(config_maps, watcher::Config::default())
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, Arc::new(client))
        .for_each(|_| futures::future::ready(()))
        .await;
}
