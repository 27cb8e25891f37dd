//! The sweep's part for custom owners: what operators own (ConfigMaps, Secrets, Services,
//! workloads, other custom objects) is collected once its custom owner is gone, as upstream's
//! garbage collector does for every kind. Runs only while some CustomResourceDefinition exists.

use super::{collect, list_meta, verdict, Owners};
use crate::api::delete_if_present;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PartialObjectMeta;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::ResourceExt;

/// Every served version of every definition, as API resources.
fn custom_resources(crds: &[CustomResourceDefinition]) -> Vec<(ApiResource, bool)> {
    let mut out = Vec::new();
    for crd in crds {
        let names = &crd.spec.names;
        for v in crd.spec.versions.iter().filter(|v| v.served) {
            let gvk = GroupVersionKind::gvk(&crd.spec.group, &v.name, &names.kind);
            let ar = ApiResource::from_gvk_with_plural(&gvk, &names.plural);
            out.push((ar, v.storage));
        }
    }
    out
}

pub(super) async fn sweep(client: &kube::Client) -> Result<(), kube::Error> {
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    if crds.is_empty() {
        return Ok(());
    }
    // Dependents before owners, as in the main sweep.
    let config_maps = list_meta::<ConfigMap>(client).await?;
    let secrets = list_meta::<Secret>(client).await?;
    let services = list_meta::<Service>(client).await?;
    let deployments = list_meta::<Deployment>(client).await?;
    let stateful = list_meta::<StatefulSet>(client).await?;
    let mut owners = Owners::default();
    let mut custom: Vec<(ApiResource, Vec<PartialObjectMeta<DynamicObject>>)> = Vec::new();
    for (ar, storage) in custom_resources(&crds) {
        owners
            .custom_kinds
            .insert((ar.api_version.clone(), ar.kind.clone()));
        if storage {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let items = api.list_metadata(&ListParams::default()).await?.items;
            owners.note(&items);
            custom.push((ar, items));
        }
    }
    owners.note(&config_maps);
    owners.note(&secrets);
    owners.note(&services);
    owners.note(&deployments);
    owners.note(&stateful);
    collect(client, &config_maps, &owners).await?;
    collect(client, &secrets, &owners).await?;
    collect(client, &services, &owners).await?;
    collect(client, &deployments, &owners).await?;
    collect(client, &stateful, &owners).await?;
    for (ar, items) in &custom {
        for o in items {
            let Some(policy) = verdict(o, &owners) else {
                continue;
            };
            let api: Api<DynamicObject> = match o.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, ar),
                None => Api::all_with(client.clone(), ar),
            };
            tracing::info!(kind = %ar.kind, name = %o.name_any(), policy, "deleting a dependent of a deleted owner");
            let params = match policy {
                "Foreground" => DeleteParams::foreground(),
                _ => DeleteParams::background(),
            };
            delete_if_present(&api, &o.name_any(), &params).await?;
        }
    }
    Ok(())
}
