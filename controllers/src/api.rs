//! The API calls every controller makes the same way: deletes that tolerate a concurrent delete,
//! status written through the status subresource, and selectors sent as a LIST's labelSelector.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as SpecSelector;
use keelson_apimachinery::LabelSelector;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::NamespaceResourceScope as Ns;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;

use crate::Error;

/// A namespaced built-in kind the sweeps list and delete.
pub trait Namespaced:
    Resource<DynamicType = (), Scope = Ns> + Clone + DeserializeOwned + Debug
{
}

impl<K: Resource<DynamicType = (), Scope = Ns> + Clone + DeserializeOwned + Debug> Namespaced
    for K
{
}

/// What these helpers take: any kind an `Api` reads back.
pub trait Kind: Clone + DeserializeOwned + Debug {}

impl<K: Clone + DeserializeOwned + Debug> Kind for K {}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// Deletes `name`; one already gone (deleted by someone else meanwhile) is not an error.
pub async fn delete_if_present<K: Kind>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<(), kube::Error> {
    match api.delete(name, params).await {
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Creates `obj`; one already there (made by someone else meanwhile) is not an error.
pub async fn create_if_absent<K: Kind + serde::Serialize>(
    api: &Api<K>,
    obj: &K,
) -> Result<(), kube::Error> {
    match api.create(&kube::api::PostParams::default(), obj).await {
        Err(kube::Error::Api(e)) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Ok(()),
    }
}

/// Merge-patches `patch` onto the object `name`.
pub async fn patch_merge<K: Kind>(api: &Api<K>, name: &str, patch: &Value) -> kube::Result<()> {
    merge_patch(api, name, patch, Part::Object).await
}

/// Merge-patches `patch` (a `{"status": ...}` object) through the status subresource.
pub async fn patch_status<K: Kind>(api: &Api<K>, name: &str, patch: &Value) -> kube::Result<()> {
    merge_patch(api, name, patch, Part::Status).await
}

/// What a merge patch is sent to: the object itself or its status subresource.
#[derive(Clone, Copy)]
enum Part {
    Object,
    Status,
}

async fn merge_patch<K: Kind>(
    api: &Api<K>,
    name: &str,
    patch: &Value,
    part: Part,
) -> kube::Result<()> {
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    match part {
        Part::Object => api.patch(name, &params, &patch).await?,
        Part::Status => api.patch_status(name, &params, &patch).await?,
    };
    Ok(())
}

/// A LIST of what a `spec.selector` (matchLabels + matchExpressions) picks; `{}` lists everything,
/// as upstream's `LabelSelectorAsSelector`.
pub fn list_selected(sel: &SpecSelector) -> Result<ListParams, Error> {
    let json = serde_json::to_value(sel).map_err(|e| Error::Invalid(e.to_string()))?;
    let sel = LabelSelector::from_json(&json)?;
    Ok(ListParams::default().labels(&sel.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_selectors_become_the_labelselector_of_a_list() {
        let sel: SpecSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [
                { "key": "tier", "operator": "In", "values": ["b", "a"] },
                { "key": "gone", "operator": "DoesNotExist" },
            ],
        }))
        .unwrap();
        let lp = list_selected(&sel).unwrap();
        assert_eq!(
            lp.label_selector.as_deref(),
            Some("app=web,!gone,tier in (a,b)")
        );
        let everything = list_selected(&SpecSelector::default()).unwrap();
        assert_eq!(everything.label_selector.as_deref(), Some(""));
    }

    #[test]
    fn invalid_selectors_are_errors() {
        let sel: SpecSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{ "key": "tier", "operator": "Near", "values": ["a"] }],
        }))
        .unwrap();
        assert!(matches!(list_selected(&sel), Err(Error::Selector(_))));
    }
}
