//! The service-account controller: every active Namespace has a ServiceAccount `default`, made
//! again when deleted (pods that name no account run as it). A kube-runtime Controller over
//! Namespaces, woken also when a `default` ServiceAccount changes.

use crate::{counted, error_policy, Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use keelson_apimachinery::well_known::DEFAULT_SERVICE_ACCOUNT;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;
use std::sync::Arc;

/// The account a namespace should have; None while it is being deleted.
pub fn wanted(ns: &Namespace) -> Option<ServiceAccount> {
    if ns.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(DEFAULT_SERVICE_ACCOUNT.into());
    sa.metadata.namespace = Some(ns.name_any());
    Some(sa)
}

pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(sa) = wanted(&ns) else {
        return Ok(Action::await_change());
    };
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &ns.name_any());
    if api.get_opt(DEFAULT_SERVICE_ACCOUNT).await?.is_none() {
        crate::api::create_if_absent(&api, &sa).await?;
        tracing::info!(namespace = %ns.name_any(), "created ServiceAccount default");
    }
    Ok(Action::await_change())
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run(ctx: Arc<Ctx>) {
    let client = &ctx.client;
    let cfg = watcher::Config::default();
    Controller::new(Api::<Namespace>::all(client.clone()), cfg.clone())
        .watches(Api::<ServiceAccount>::all(client.clone()), cfg, |sa| {
            let default = sa.name_any() == DEFAULT_SERVICE_ACCOUNT;
            default
                .then(|| sa.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns)))
                .flatten()
        })
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone())
        .for_each(counted(ctx.clone()))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_active_namespace_wants_default() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("team".into());
        let sa = wanted(&ns).unwrap();
        assert_eq!(sa.metadata.name.as_deref(), Some("default"));
        assert_eq!(sa.metadata.namespace.as_deref(), Some("team"));
        ns.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(wanted(&ns).is_none());
    }
}
