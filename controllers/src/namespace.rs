//! The namespace controller, as a periodic sweep: a terminating Namespace is emptied of every
//! namespaced kind Keelson serves, then removed.

use crate::api::{delete_if_present, Namespaced};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;

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
        delete_if_present(&api, &o.name_any(), &DeleteParams::background()).await?;
    }
    Ok(items.len())
}

/// Deletes what is left in `ns`; returns how many objects were still there.
async fn empty(client: &kube::Client, ns: &str) -> Result<usize, kube::Error> {
    Ok(empty_kind::<Deployment>(client, ns).await?
        + empty_kind::<ReplicaSet>(client, ns).await?
        + empty_kind::<Pod>(client, ns).await?
        + empty_kind::<Service>(client, ns).await?
        + empty_kind::<EndpointSlice>(client, ns).await?
        + empty_kind::<Endpoints>(client, ns).await?
        + empty_kind::<Ingress>(client, ns).await?
        + empty_kind::<ConfigMap>(client, ns).await?
        + empty_kind::<Secret>(client, ns).await?
        + empty_kind::<ServiceAccount>(client, ns).await?
        + empty_kind::<Event>(client, ns).await?)
}

/// One pass: empties every terminating Namespace, and removes those already empty.
pub async fn sweep(client: &kube::Client) -> Result<(), kube::Error> {
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in nss.list(&ListParams::default()).await?.items {
        if ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let name = ns.name_any();
        if empty(client, &name).await? == 0 {
            tracing::info!(namespace = %name, "namespace empty; removing it");
            delete_if_present(&nss, &name, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}
