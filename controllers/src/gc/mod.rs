//! The garbage collector, as a periodic sweep beside the API server's own propagation (which
//! orphans and starts foreground deletions at DELETE time), over every resource served
//! (`resources`): dependents whose owners are all gone are deleted (background), and
//! dependents of an owner being deleted in the foreground that the API server did not reach
//! (made meanwhile) are deleted, as upstream's attemptToDeleteItem decides. Before a dependent
//! is deleted for owners that look gone, each owner is read again by name (upstream's
//! isDangling): one made after the sweep's lists is not taken for a deleted one.

use crate::api::delete_if_present;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Preconditions};
use kube::discovery::{ApiResource, Scope};
use kube::ResourceExt;
use std::collections::HashSet;

pub mod resources;

pub use resources::Resources;

/// upstream's finalizer of an owner held until its dependents are gone.
const FOREGROUND: &str = "foregroundDeletion";

/// What the sweep knows of the owners it listed.
#[derive(Debug, Default)]
pub struct Owners {
    /// Every listed object's uid.
    pub alive: HashSet<String>,
    /// Owners being deleted in the foreground (deletionTimestamp and foregroundDeletion).
    pub foreground: HashSet<String>,
    /// Uids that some listed object names as an owner: those objects have dependents.
    pub owning: HashSet<String>,
    /// The kinds (apiVersion, kind) whose objects were all listed, so a reference to one
    /// that is not among them names an owner that is gone; a reference to any other kind
    /// (not served) counts as alive.
    pub kinds: HashSet<(String, String)>,
}

impl Owners {
    /// Notes each listed object: alive, maybe held in the foreground, and whom it names.
    pub fn note<K: ResourceExt>(&mut self, items: &[K]) {
        for o in items {
            let Some(uid) = o.uid() else { continue };
            let held = o.meta().deletion_timestamp.is_some()
                && o.finalizers().iter().any(|f| f == FOREGROUND);
            if held {
                self.foreground.insert(uid.clone());
            }
            self.alive.insert(uid);
            self.owning
                .extend(o.owner_references().iter().map(|r| r.uid.clone()));
        }
    }
}

/// The propagation a dependent is deleted with, or None to keep it. Kept: an object being
/// deleted, one without owners, one with a live owner not held in the foreground. Deleted:
/// with an owner held in the foreground (itself in the foreground when it owns something, so
/// the owner waits for the whole tree); with every owner gone, in the background.
pub fn verdict<K: ResourceExt>(obj: &K, owners: &Owners) -> Option<&'static str> {
    let refs = obj.owner_references();
    if refs.is_empty() || obj.meta().deletion_timestamp.is_some() {
        return None;
    }
    let looked_up = |r: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference| {
        owners
            .kinds
            .contains(&(r.api_version.clone(), r.kind.clone()))
    };
    let solid = refs.iter().any(|r| {
        !looked_up(&r) || (owners.alive.contains(&r.uid) && !owners.foreground.contains(&r.uid))
    });
    if solid {
        return None;
    }
    let waited_for = refs.iter().any(|r| owners.foreground.contains(&r.uid));
    let has_dependents = obj.uid().is_some_and(|u| owners.owning.contains(&u));
    Some(if waited_for && has_dependents {
        "Foreground"
    } else {
        "Background"
    })
}

type Listed = Vec<PartialObjectMeta<DynamicObject>>;

fn api(
    client: &kube::Client,
    ar: &ApiResource,
    scope: &Scope,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    match (scope, ns) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        _ => Api::all_with(client.clone(), ar),
    }
}

/// Whether an owner `o` names still exists (the same object: its uid), read now.
async fn owner_exists(
    client: &kube::Client,
    resources: &Resources,
    o: &PartialObjectMeta<DynamicObject>,
) -> Result<bool, kube::Error> {
    for r in o.owner_references() {
        let Some((ar, scope)) = resources
            .kinds
            .get(&(r.api_version.clone(), r.kind.clone()))
        else {
            continue;
        };
        let owner = api(client, ar, scope, o.namespace().as_deref())
            .get_metadata_opt(&r.name)
            .await?;
        if owner.is_some_and(|m| m.uid().as_deref() == Some(r.uid.as_str())) {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn collect(
    client: &kube::Client,
    resources: &Resources,
    (ar, scope): &(ApiResource, Scope),
    items: &Listed,
    owners: &Owners,
) -> Result<(), kube::Error> {
    for listed in items {
        if verdict(listed, owners).is_none() {
            continue;
        }
        let api = api(client, ar, scope, listed.namespace().as_deref());
        // Decided again on the object as it is now, as upstream's attemptToDeleteItem: an
        // orphaning DELETE of its owner made between this sweep's lists removed the
        // reference, then the owner, so the owner looks gone while the listed dependent still
        // names it. The delete holds only for that version (a 409 leaves it to the next sweep).
        let Some(o) = api.get_metadata_opt(&listed.name_any()).await? else {
            continue;
        };
        let Some(policy) = verdict(&o, owners) else {
            continue;
        };
        if policy == "Background" && owner_exists(client, resources, &o).await? {
            continue;
        }
        let mut params = match policy {
            "Foreground" => DeleteParams::foreground(),
            _ => DeleteParams::background(),
        };
        params.preconditions = Some(Preconditions {
            uid: o.uid(),
            resource_version: o.resource_version(),
        });
        match delete_if_present(&api, &o.name_any(), &params).await {
            Ok(()) => {
                tracing::info!(kind = %ar.kind, name = %o.name_any(), policy, "deleted a dependent of a deleted owner");
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::debug!(name = %o.name_any(), "changed since listed; left for the next sweep");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One pass over every resource served that can be listed and deleted.
pub async fn sweep(client: &kube::Client, resources: &mut Resources) -> Result<(), kube::Error> {
    resources.refresh(client).await?;
    let mut owners = Owners {
        kinds: resources.served(),
        ..Default::default()
    };
    let mut all: Vec<(&(ApiResource, Scope), Listed)> = Vec::new();
    for resource @ (ar, scope) in &resources.listed {
        match api(client, ar, scope, None)
            .list_metadata(&ListParams::default())
            .await
        {
            Ok(list) => {
                owners.note(&list.items);
                all.push((resource, list.items));
            }
            // One resource the collector may not list (a 403, or gone with its definition):
            // its objects are not swept, and owners of its kind count as alive.
            Err(kube::Error::Api(e)) => {
                tracing::debug!(resource = %ar.plural, code = e.code, "not listed by the garbage collector");
                let group = |v: &str| v.split_once('/').map_or("", |(g, _)| g).to_string();
                owners
                    .kinds
                    .retain(|(v, k)| !(k == &ar.kind && group(v) == ar.group));
            }
            Err(e) => return Err(e),
        }
    }
    for (resource, items) in &all {
        collect(client, resources, resource, items, &owners).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::{owner_ref, pod};
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn owned(name: &str, api_version: &str, kind: &str, owner_uid: &str) -> Pod {
        let mut p = pod(name, true, "Running");
        p.metadata.owner_references = Some(vec![owner_ref(api_version, kind, "o", owner_uid)]);
        p
    }

    fn verdicts(items: &[Pod], owners: &Owners) -> Vec<(String, &'static str)> {
        items
            .iter()
            .filter_map(|p| verdict(p, owners).map(|v| (p.name_any(), v)))
            .collect()
    }

    #[test]
    fn only_objects_whose_looked_up_owners_are_all_gone() {
        let items = [
            owned("a", "apps/v1", "ReplicaSet", "rs-live"),
            owned("b", "apps/v1", "ReplicaSet", "rs-gone"),
            pod("c", true, "Running"),
            owned("d", "example.com/v1", "Widget", "w-1"),
            owned("e", "batch/v1", "Job", "job-gone"),
            owned("f", "apps/v1", "StatefulSet", "sts-gone"),
            owned("g", "v1", "PersistentVolumeClaim", "pvc-gone"),
        ];
        let served = [
            ("apps/v1", "ReplicaSet"),
            ("batch/v1", "Job"),
            ("apps/v1", "StatefulSet"),
        ];
        let owners = Owners {
            alive: ["rs-live".to_string()].into(),
            kinds: served
                .iter()
                .map(|(v, k)| (v.to_string(), k.to_string()))
                .collect(),
            ..Default::default()
        };
        let got = verdicts(&items, &owners);
        let want = [
            ("b", "Background"),
            ("e", "Background"),
            ("f", "Background"),
        ];
        assert_eq!(got, want.map(|(n, v)| (n.to_string(), v)));
    }

    #[test]
    fn dependents_of_a_foreground_deletion_go_and_owners_of_more_go_in_the_foreground() {
        let mut deploy = Deployment::default();
        deploy.metadata.uid = Some("d1".into());
        deploy.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        deploy.metadata.finalizers = Some(vec![FOREGROUND.into()]);
        let rs = owned("rs", "apps/v1", "Deployment", "d1");
        let leaf = owned("leaf", "apps/v1", "Deployment", "d1");
        let child = owned("child", "apps/v1", "ReplicaSet", "uid-rs");
        let mut owners = Owners {
            kinds: [("apps/v1".to_string(), "Deployment".to_string())].into(),
            ..Default::default()
        };
        owners.note(&[deploy]);
        owners.note(&[rs.clone(), leaf.clone(), child.clone()]);
        let got = verdicts(&[rs, leaf, child], &owners);
        assert_eq!(
            got,
            vec![
                ("rs".to_string(), "Foreground"),
                ("leaf".to_string(), "Background")
            ]
        );
    }

    #[test]
    fn a_dependent_being_deleted_is_left_alone() {
        let mut p = owned("a", "apps/v1", "ReplicaSet", "rs-gone");
        p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert_eq!(verdict(&p, &Owners::default()), None);
    }
}
