//! The garbage collector, as a periodic sweep: dependents whose owners are all gone are deleted
//! (background propagation).

use crate::api::{delete_if_present, Namespaced};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta};
use kube::ResourceExt;
use std::collections::HashSet;

/// The owner kinds this collector looks up. A reference to any other kind counts as alive: an
/// owner it cannot see is never taken for a deleted one.
const OWNER_KINDS: [(&str, &str); 3] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("v1", "Service"),
];

/// Dependents whose every owner is of a kind looked up here and missing from `alive` (uids).
pub fn orphans<'a, K: ResourceExt>(items: &'a [K], alive: &HashSet<String>) -> Vec<&'a K> {
    items
        .iter()
        .filter(|o| !o.owner_references().is_empty())
        .filter(|o| {
            o.owner_references().iter().all(|r| {
                OWNER_KINDS.contains(&(r.api_version.as_str(), r.kind.as_str()))
                    && !alive.contains(&r.uid)
            })
        })
        .collect()
}

async fn list_meta<K>(client: &kube::Client) -> Result<Vec<PartialObjectMeta<K>>, kube::Error>
where
    K: Namespaced,
{
    let all: Api<K> = Api::all(client.clone());
    Ok(all.list_metadata(&ListParams::default()).await?.items)
}

fn uids<K>(items: &[PartialObjectMeta<K>]) -> impl Iterator<Item = String> + '_ {
    items.iter().filter_map(|m| m.metadata.uid.clone())
}

async fn delete_orphans<K>(
    client: &kube::Client,
    items: &[PartialObjectMeta<K>],
    alive: &HashSet<String>,
) -> Result<(), kube::Error>
where
    K: Namespaced,
{
    for o in orphans(items, alive) {
        if o.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let api: Api<K> = Api::namespaced(client.clone(), &o.namespace().unwrap_or_default());
        tracing::info!(kind = K::kind(&()).as_ref(), name = %o.name_any(), "deleting dependent of a deleted owner");
        delete_if_present(&api, &o.name_any(), &DeleteParams::background()).await?;
    }
    Ok(())
}

/// One pass: deletes the ReplicaSets, Pods and EndpointSlices whose owners are all gone.
pub async fn sweep(client: &kube::Client) -> Result<(), kube::Error> {
    // Dependents are listed before their owners: an owner exists before anything points to it,
    // so every live owner of a listed dependent is in the later owner lists. Listing owners
    // first would take a dependent of an owner created in between for an orphan.
    let pods = list_meta::<Pod>(client).await?;
    let slices = list_meta::<EndpointSlice>(client).await?;
    let sets = list_meta::<ReplicaSet>(client).await?;
    let deployments = list_meta::<Deployment>(client).await?;
    let services = list_meta::<Service>(client).await?;
    let alive: HashSet<String> = uids(&sets)
        .chain(uids(&deployments))
        .chain(uids(&services))
        .collect();
    delete_orphans(client, &sets, &alive).await?;
    delete_orphans(client, &pods, &alive).await?;
    delete_orphans(client, &slices, &alive).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::{owner_ref, pod};

    #[test]
    fn only_objects_whose_looked_up_owners_are_all_gone() {
        let mut a = pod("a", true, "Running");
        a.metadata.owner_references =
            Some(vec![owner_ref("apps/v1", "ReplicaSet", "rs", "rs-live")]);
        let mut b = pod("b", true, "Running");
        b.metadata.owner_references =
            Some(vec![owner_ref("apps/v1", "ReplicaSet", "rs", "rs-gone")]);
        let c = pod("c", true, "Running");
        let mut d = pod("d", true, "Running");
        d.metadata.owner_references = Some(vec![owner_ref("batch/v1", "Job", "j", "job-1")]);
        let items = [a, b, c, d];
        let alive: HashSet<String> = ["rs-live".to_string()].into();
        let names: Vec<_> = orphans(&items, &alive)
            .iter()
            .map(|p| p.name_any())
            .collect();
        assert_eq!(names, ["b"]);
    }
}
