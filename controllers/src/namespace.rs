//! The namespace controller, as a periodic sweep: a terminating Namespace is emptied of every
//! namespaced kind the API server serves (found by discovery, as upstream's controller does, so
//! a kind served later, e.g. NetworkPolicy, is never left behind), then removed.

use crate::api::delete_if_present;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::{verbs, ApiResource, Discovery, Scope};
use kube::ResourceExt;

/// Every namespaced kind that can be listed and deleted (subresources are not listed).
async fn namespaced_kinds(client: &kube::Client) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    Ok(discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| {
            caps.scope == Scope::Namespaced
                && caps.supports_operation(verbs::LIST)
                && caps.supports_operation(verbs::DELETE)
        })
        .map(|(ar, _)| ar)
        .collect())
}

/// Deletes everything of one kind in a namespace; returns how many were still there.
async fn empty_kind(
    client: &kube::Client,
    ns: &str,
    ar: &ApiResource,
) -> Result<usize, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
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
async fn empty(
    client: &kube::Client,
    ns: &str,
    kinds: &[ApiResource],
) -> Result<usize, kube::Error> {
    let mut left = 0;
    for ar in kinds {
        left += empty_kind(client, ns, ar).await?;
    }
    Ok(left)
}

/// One pass: empties every terminating Namespace, and removes those already empty.
pub async fn sweep(client: &kube::Client) -> Result<(), kube::Error> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut kinds: Option<Vec<ApiResource>> = None;
    for ns in nss.list(&ListParams::default()).await?.items {
        if ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let name = ns.name_any();
        // Discovery once per sweep, and only when some namespace is terminating.
        let kinds = match &kinds {
            Some(k) => k,
            None => kinds.insert(namespaced_kinds(client).await?),
        };
        if empty(client, &name, kinds).await? == 0 {
            tracing::info!(namespace = %name, "namespace empty; removing it");
            delete_if_present(&nss, &name, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}
