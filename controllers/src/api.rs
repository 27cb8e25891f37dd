//! The API calls every controller makes the same way: deletes that tolerate a concurrent delete,
//! status written through the status subresource, and selectors sent as a LIST's labelSelector.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as SpecSelector;
use keelson_apimachinery::LabelSelector;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::NamespaceResourceScope as Ns;
use kube::Resource;
use serde::de::DeserializeOwned;
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

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// Deletes `name`; one already gone (deleted by someone else meanwhile) is not an error.
pub async fn delete_if_present<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    match api.delete(name, params).await {
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Creates `obj`; one already there (made by someone else meanwhile) is not an error.
pub async fn create_if_absent<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug + serde::Serialize,
{
    match api.create(&kube::api::PostParams::default(), obj).await {
        Err(kube::Error::Api(e)) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Ok(()),
    }
}

/// Merge-patches `patch` onto the object `name`.
pub async fn patch_merge<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Merge-patches `patch` (a `{"status": ...}` object) through the status subresource.
pub async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
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
