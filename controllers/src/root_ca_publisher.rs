//! The root-CA publisher: every active Namespace has a ConfigMap kube-root-ca.crt whose
//! `ca.crt` is the cluster CA (--root-ca-file), so pods' projected token volumes carry it and
//! in-cluster clients can verify the API server. Edits and deletions are undone.

use crate::{counted, error_policy, Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use keelson_apimachinery::well_known::ROOT_CA_CONFIGMAP;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Upstream's description of the ConfigMap.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The publisher's own state: the CA bundle it publishes.
pub struct Publisher {
    pub ctx: Arc<Ctx>,
    pub ca_pem: String,
}

/// The ConfigMap's data, and whether `current` (if any) already holds it.
pub fn wanted(ca_pem: &str, current: Option<&ConfigMap>) -> (BTreeMap<String, String>, bool) {
    let data = BTreeMap::from([("ca.crt".to_string(), ca_pem.to_string())]);
    let up_to_date = current.is_some_and(|cm| cm.data.as_ref() == Some(&data));
    (data, up_to_date)
}

async fn reconcile(ns: Arc<Namespace>, p: Arc<Publisher>) -> Result<Action, Error> {
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let api: Api<ConfigMap> = Api::namespaced(p.ctx.client.clone(), &ns.name_any());
    let current = api.get_opt(ROOT_CA_CONFIGMAP).await?;
    let (data, up_to_date) = wanted(&p.ca_pem, current.as_ref());
    if up_to_date {
        return Ok(Action::await_change());
    }
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(ROOT_CA_CONFIGMAP.into());
    cm.metadata.annotations = Some(BTreeMap::from([(
        "kubernetes.io/description".to_string(),
        DESCRIPTION.to_string(),
    )]));
    cm.data = Some(data);
    match current {
        None => crate::api::create_if_absent(&api, &cm).await?,
        // An update with the version read: a concurrent change makes it conflict and retry.
        Some(mut current) => {
            current.data = cm.data;
            api.replace(ROOT_CA_CONFIGMAP, &PostParams::default(), &current)
                .await?;
        }
    }
    tracing::info!(namespace = %ns.name_any(), "published {ROOT_CA_CONFIGMAP}");
    Ok(Action::await_change())
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run(ctx: Arc<Ctx>, ca_pem: String) {
    let client = &ctx.client;
    let cfg = watcher::Config::default();
    let publisher = Arc::new(Publisher {
        ctx: ctx.clone(),
        ca_pem,
    });
    Controller::new(Api::<Namespace>::all(client.clone()), cfg.clone())
        .watches(Api::<ConfigMap>::all(client.clone()), cfg, |cm| {
            let ours = cm.name_any() == ROOT_CA_CONFIGMAP;
            ours.then(|| cm.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns)))
                .flatten()
        })
        .shutdown_on_signal()
        .run(
            reconcile,
            |ns, e, p: Arc<Publisher>| error_policy(ns, e, p.ctx.clone()),
            publisher,
        )
        .for_each(counted(ctx.clone()))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_the_bundle_and_sees_when_it_is_there() {
        let (data, up_to_date) = wanted("PEM", None);
        assert_eq!(data.get("ca.crt").map(String::as_str), Some("PEM"));
        assert!(!up_to_date);
        let cm = ConfigMap {
            data: Some(data.clone()),
            ..Default::default()
        };
        assert!(wanted("PEM", Some(&cm)).1);
        assert!(
            !wanted("OTHER", Some(&cm)).1,
            "a changed CA is published again"
        );
    }
}
