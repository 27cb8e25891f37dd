//! The garbage collector and the namespace controller, as one periodic sweep: dependents whose
//! owners are all gone are deleted (background propagation), and a terminating Namespace is
//! emptied, then removed.

use crate::Ctx;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta};
use kube::core::NamespaceResourceScope as Ns;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// A namespaced built-in kind this sweep lists and deletes.
pub trait Namespaced:
    Resource<DynamicType = (), Scope = Ns> + Clone + DeserializeOwned + Debug
{
}

impl<K: Resource<DynamicType = (), Scope = Ns> + Clone + DeserializeOwned + Debug> Namespaced
    for K
{
}

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
        match api.delete(&o.name_any(), &DeleteParams::background()).await {
            Err(e) if !crate::is_not_found(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

async fn sweep_owners(client: &kube::Client) -> Result<(), kube::Error> {
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

/// Deletes everything of one kind in a namespace; returns how many were still there.
async fn empty_kind<K>(client: &kube::Client, ns: &str) -> Result<usize, kube::Error>
where
    K: Namespaced,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let items = api.list_metadata(&ListParams::default()).await?.items;
    for o in items
        .iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
    {
        match api.delete(&o.name_any(), &DeleteParams::background()).await {
            Err(e) if !crate::is_not_found(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(items.len())
}

async fn finish_namespaces(client: &kube::Client) -> Result<(), kube::Error> {
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in nss.list(&ListParams::default()).await?.items {
        if ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let name = ns.name_any();
        let left = empty_kind::<Deployment>(client, &name).await?
            + empty_kind::<ReplicaSet>(client, &name).await?
            + empty_kind::<Pod>(client, &name).await?
            + empty_kind::<Service>(client, &name).await?
            + empty_kind::<EndpointSlice>(client, &name).await?
            + empty_kind::<Endpoints>(client, &name).await?
            + empty_kind::<Ingress>(client, &name).await?
            + empty_kind::<ConfigMap>(client, &name).await?
            + empty_kind::<Secret>(client, &name).await?
            + empty_kind::<ServiceAccount>(client, &name).await?
            + empty_kind::<Event>(client, &name).await?;
        if left == 0 {
            tracing::info!(namespace = %name, "namespace empty; removing it");
            match nss.delete(&name, &DeleteParams::default()).await {
                Err(e) if !crate::is_not_found(&e) => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}

pub async fn run(ctx: Arc<Ctx>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = sweep_owners(&ctx.client).await {
            tracing::warn!(error = %e, "garbage collection sweep failed");
        }
        if let Err(e) = finish_namespaces(&ctx.client).await {
            tracing::warn!(error = %e, "namespace sweep failed");
        }
    }
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
