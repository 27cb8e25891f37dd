//! What the garbage collector looks at: every resource the API server serves that can be
//! listed and deleted (upstream's collector watches them all), but Events (upstream's
//! default ignoredResources), from discovery kept for a while, since kinds come and go with
//! CustomResourceDefinitions.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kube::discovery::{verbs, ApiResource, Discovery, Scope};

/// How long a discovery is used before it is made again.
const REFRESH: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Resources {
    /// The resources swept: their recommended version.
    pub listed: Vec<(ApiResource, Scope)>,
    /// Every served (apiVersion, kind), in any version, with the resource to read it by.
    pub kinds: HashMap<(String, String), (ApiResource, Scope)>,
    made: Option<Instant>,
}

impl Resources {
    /// Made again when older than `REFRESH` (or never made).
    pub async fn refresh(&mut self, client: &kube::Client) -> Result<(), kube::Error> {
        if self.made.is_some_and(|t| t.elapsed() < REFRESH) {
            return Ok(());
        }
        let discovery = Discovery::new(client.clone()).run().await?;
        let mut listed = Vec::new();
        let mut kinds = HashMap::new();
        for group in discovery.groups() {
            for version in group.versions() {
                for (ar, caps) in group.versioned_resources(version) {
                    let key = (ar.api_version.clone(), ar.kind.clone());
                    kinds.insert(key, (ar, caps.scope));
                }
            }
            for (ar, caps) in group.recommended_resources() {
                let sweepable = caps.supports_operation(verbs::LIST)
                    && caps.supports_operation(verbs::DELETE)
                    && !ignored(&ar);
                if sweepable {
                    listed.push((ar, caps.scope));
                }
            }
        }
        *self = Resources {
            listed,
            kinds,
            made: Some(Instant::now()),
        };
        Ok(())
    }

    /// The (apiVersion, kind) pairs served.
    pub fn served(&self) -> HashSet<(String, String)> {
        self.kinds.keys().cloned().collect()
    }
}

/// Events in either group: many, short-lived, owned by no one (upstream ignores them too).
fn ignored(ar: &ApiResource) -> bool {
    ar.plural == "events" && (ar.group.is_empty() || ar.group == "events.k8s.io")
}
