//! The garbage collector, as a periodic sweep beside the API server's own propagation (which
//! orphans and starts foreground deletions at DELETE time): dependents whose owners are all gone
//! are deleted (background), and dependents of an owner being deleted in the foreground that
//! the API server did not reach (made meanwhile) are deleted, as upstream's
//! attemptToDeleteItem decides.

use crate::api::{delete_if_present, Namespaced};
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta, Preconditions};
use kube::ResourceExt;
use std::collections::HashSet;

mod custom;

/// The owner kinds this collector looks up. A reference to any other kind (a Node, a
/// PersistentVolumeClaim, a custom kind) counts as alive: an owner it cannot see is never taken
/// for a deleted one.
const OWNER_KINDS: [(&str, &str); 7] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("v1", "Service"),
];

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
    /// Custom kinds (apiVersion, kind) whose objects were all listed, so a reference to one
    /// that is not among them names an owner that is gone.
    pub custom_kinds: HashSet<(String, String)>,
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
        OWNER_KINDS.contains(&(r.api_version.as_str(), r.kind.as_str()))
            || owners
                .custom_kinds
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

async fn list_meta<K>(client: &kube::Client) -> Result<Vec<PartialObjectMeta<K>>, kube::Error>
where
    K: Namespaced,
{
    let all: Api<K> = Api::all(client.clone());
    Ok(all.list_metadata(&ListParams::default()).await?.items)
}

async fn collect<K>(
    client: &kube::Client,
    items: &[PartialObjectMeta<K>],
    owners: &Owners,
) -> Result<(), kube::Error>
where
    K: Namespaced,
{
    for listed in items {
        if verdict(listed, owners).is_none() {
            continue;
        }
        let api: Api<K> = Api::namespaced(client.clone(), &listed.namespace().unwrap_or_default());
        // Decided again on the object as it is now, as upstream's attemptToDeleteItem: an
        // orphaning DELETE of its owner made between this sweep's list of dependents and its
        // list of owners removed the reference, then the owner, so the owner looks gone while
        // the listed dependent still names it. The delete holds only for that version (a 409
        // leaves it to the next sweep).
        let Some(o) = api.get_metadata_opt(&listed.name_any()).await? else {
            continue;
        };
        let Some(policy) = verdict(&o, owners) else {
            continue;
        };
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
                tracing::info!(kind = K::kind(&()).as_ref(), name = %o.name_any(), policy, "deleted a dependent of a deleted owner");
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::debug!(name = %o.name_any(), "changed since listed; left for the next sweep");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One pass over ReplicaSets, Pods, EndpointSlices, ControllerRevisions, Jobs and
/// PersistentVolumeClaims.
pub async fn sweep(client: &kube::Client) -> Result<(), kube::Error> {
    // Dependents are listed before their owners: an owner exists before anything points to it,
    // so every live owner of a listed dependent is in the later owner lists. Listing owners
    // first would take a dependent of an owner created in between for an orphan.
    let pods = list_meta::<Pod>(client).await?;
    let slices = list_meta::<EndpointSlice>(client).await?;
    let revisions = list_meta::<ControllerRevision>(client).await?;
    let claims = list_meta::<PersistentVolumeClaim>(client).await?;
    let sets = list_meta::<ReplicaSet>(client).await?;
    let jobs = list_meta::<Job>(client).await?;
    let mut owners = Owners::default();
    owners.note(&pods);
    owners.note(&slices);
    owners.note(&revisions);
    owners.note(&claims);
    owners.note(&sets);
    owners.note(&jobs);
    owners.note(&list_meta::<Deployment>(client).await?);
    owners.note(&list_meta::<DaemonSet>(client).await?);
    owners.note(&list_meta::<StatefulSet>(client).await?);
    owners.note(&list_meta::<CronJob>(client).await?);
    owners.note(&list_meta::<Service>(client).await?);
    collect(client, &sets, &owners).await?;
    collect(client, &jobs, &owners).await?;
    collect(client, &pods, &owners).await?;
    collect(client, &slices, &owners).await?;
    collect(client, &revisions, &owners).await?;
    collect(client, &claims, &owners).await?;
    custom::sweep(client).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::{owner_ref, pod};
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
        let owners = Owners {
            alive: ["rs-live".to_string()].into(),
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
        let mut owners = Owners::default();
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
