//! The ingress controller's Events, as ingress-nginx's: `Sync` ("Scheduled for sync") when a
//! handled Ingress is new or its spec changed, and a Warning for an Ingress left out of the
//! configuration (Ingress status has only loadBalancer, so `kubectl describe ingress` is where
//! a user reads why). Written through the shared recorder: never holds up a sync.

use k8s_openapi::api::networking::v1::Ingress;
use keelson_daemon::events::{EventType, Recorder, Reporter};
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::Rejection;

/// ingress-nginx's reporting component.
pub const COMPONENT: &str = "nginx-ingress-controller";

pub struct IngressEvents {
    recorder: Recorder,
    /// uid -> generation of each Ingress last announced with Sync.
    synced: BTreeMap<String, i64>,
}

impl IngressEvents {
    /// Starts the recorder's writer on the current Tokio runtime.
    pub fn new(client: kube::Client) -> IngressEvents {
        let reporter = Reporter {
            component: COMPONENT.into(),
            host: None,
        };
        IngressEvents {
            recorder: Recorder::new(client, reporter),
            synced: BTreeMap::new(),
        }
    }

    /// A Warning Event for `rejection` on `ing`.
    pub fn rejected(&self, ing: &Ingress, rejection: &Rejection) {
        self.recorder.publish(
            ing,
            EventType::Warning,
            rejection.reason,
            rejection.message.clone(),
        );
    }

    /// `Sync` on each of `handled` that is new or has a new generation since the last call.
    pub fn synced<'a>(&mut self, handled: impl IntoIterator<Item = &'a Arc<Ingress>>) {
        let now: BTreeMap<String, i64> = handled
            .into_iter()
            .map(|ing| {
                let generation = ing.metadata.generation.unwrap_or_default();
                let uid = ing.uid().unwrap_or_default();
                if self.synced.get(&uid) != Some(&generation) {
                    self.recorder.publish(
                        ing.as_ref(),
                        EventType::Normal,
                        "Sync",
                        "Scheduled for sync",
                    );
                }
                (uid, generation)
            })
            .collect();
        self.synced = now;
    }
}
