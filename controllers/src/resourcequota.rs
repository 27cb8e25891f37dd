//! The resource quota controller: keeps each ResourceQuota's status (hard as the spec says it,
//! used as recounted from the namespace's objects) current, as upstream's. The API server's
//! quota admission charges new objects to status.used at once; this controller is what gives
//! back what deleted and finished objects held, and corrects any overcount. The arithmetic is
//! keelson_apimachinery::quota, shared with the admission.

use crate::{Ctx, Error};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use keelson_apimachinery::quota;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Pods wake their namespace's quotas at once; other kinds are recounted this often, which is
/// how long a deleted Service or Secret keeps holding its place in a quota.
const RECOUNT: Duration = Duration::from_secs(15);

/// How long a lower count waits before it is written. The admission charges a quota before it
/// stores the object, so a count taken between the two misses an object already paid for, and
/// writing it would give the same place to the next create. A charge older than this has its
/// object stored by now, or its create failed and the place is rightly given back.
const SETTLE: Duration = Duration::from_secs(1);
/// Counts retaken while creates keep charging the quota, before trying again later.
const SETTLE_TRIES: usize = 3;

/// Runs until SIGTERM or Ctrl-C: woken by quotas and by pods of their namespaces.
pub async fn run(ctx: Arc<Ctx>) {
    crate::run_woken_by_pods::<ResourceQuota, _, _>(ctx, reconcile).await;
}

/// The collection behind a quota name: "pods" and the other legacy names are core, and
/// "count/<plural>[.<group>]" names its group. None for compute and storage amounts, which
/// pods and claims carry.
fn collection_of(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        return Some(match rest.split_once('.') {
            Some((plural, group)) => (group.to_string(), plural.to_string()),
            None => (String::new(), rest.to_string()),
        });
    }
    let core = match name {
        "services.nodeports" | "services.loadbalancers" => "services",
        "requests.storage" => "persistentvolumeclaims",
        n if !n.contains('.')
            && !n.contains('/')
            && n.ends_with('s')
            && n != "ephemeral-storage" =>
        {
            n
        }
        _ => "pods",
    };
    Some((String::new(), core.to_string()))
}

/// The served resource for (group, plural): core is always v1; other groups are asked for
/// their preferred version. None when the group does not serve it (nothing to count).
async fn api_resource(client: &kube::Client, group: &str, plural: &str) -> Option<ApiResource> {
    if group.is_empty() {
        let gvk = GroupVersionKind::gvk("", "v1", "");
        return Some(ApiResource::from_gvk_with_plural(&gvk, plural));
    }
    let served = kube::discovery::group(client, group).await.ok()?;
    served
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == plural)
        .map(|(r, _)| r)
}

/// The namespace's objects of one collection, as JSON.
async fn list(
    client: &kube::Client,
    ns: &str,
    group: &str,
    plural: &str,
) -> Result<Vec<Value>, Error> {
    if group.is_empty() && plural == "pods" {
        let pods = Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?;
        return Ok(pods
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect());
    }
    let Some(ar) = api_resource(client, group, plural).await else {
        return Ok(Vec::new());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let items = api.list(&ListParams::default()).await?.items;
    Ok(items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

pub async fn reconcile(rq: Arc<ResourceQuota>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if rq.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = rq.namespace().unwrap_or_default();
    let api: Api<ResourceQuota> = Api::namespaced(ctx.client.clone(), &ns);
    let name = rq.name_any();
    let mut count = recount(&ctx, &api, &ns, &name).await?;
    let mut settled = !count.lower;
    for _ in 0..SETTLE_TRIES {
        if settled {
            break;
        }
        tokio::time::sleep(SETTLE).await;
        let next = recount(&ctx, &api, &ns, &name).await?;
        // The same resourceVersion: no charge since the first count, so each one it saw is
        // older than SETTLE and its object is listed now (or its create failed).
        settled = !next.lower
            || next.quota.metadata.resource_version == count.quota.metadata.resource_version;
        count = next;
    }
    let Count {
        quota: current,
        used,
        ..
    } = count;
    if !settled {
        return Ok(Action::requeue(SETTLE));
    }
    let status = ResourceQuotaStatus {
        hard: Some(
            current
                .spec
                .as_ref()
                .and_then(|s| s.hard.clone())
                .unwrap_or_default(),
        ),
        used: Some(
            used.iter()
                .map(|(k, v)| (k.clone(), Quantity(quota::format(k, *v))))
                .collect(),
        ),
    };
    if current.status.as_ref() != Some(&status) {
        let mut next = current.clone();
        next.status = Some(status);
        api.replace_status(&name, &PostParams::default(), &next)
            .await?;
    }
    Ok(Action::requeue(RECOUNT))
}

/// One count of a quota's namespace.
struct Count {
    /// The quota as read just before the count.
    quota: ResourceQuota,
    /// What the namespace's objects use of each hard limit now.
    used: quota::Usage,
    /// Whether `used` is below what the quota's status records for any resource.
    lower: bool,
}

/// The quota read fresh, and what its namespace's objects use now.
async fn recount(
    ctx: &Ctx,
    api: &Api<ResourceQuota>,
    ns: &str,
    name: &str,
) -> Result<Count, Error> {
    // Read fresh: what the admission charged since the watch delivered the quota must make the
    // status write conflict (and retry) rather than be overwritten by a count that predates it.
    let current = api.get(name).await?;
    let hard = current
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let quota_json = serde_json::to_value(&current).unwrap_or_default();
    let collections: BTreeSet<(String, String)> =
        hard.keys().filter_map(|n| collection_of(n)).collect();
    let mut used: quota::Usage = hard.keys().map(|k| (k.clone(), 0)).collect();
    for (group, plural) in &collections {
        for obj in list(&ctx.client, ns, group, plural).await? {
            if !quota::applies(&quota_json, group, plural, &obj) {
                continue;
            }
            for (name, amount) in quota::usage(group, plural, &obj) {
                if let Some(total) = used.get_mut(&name) {
                    *total += amount;
                }
            }
        }
    }
    let recorded = quota::parse_list(quota_json.pointer("/status/used"));
    Ok(Count {
        lower: lowers(&recorded, &used),
        quota: current,
        used,
    })
}

/// Whether `used` is below the `recorded` use for any resource: a place given back.
fn lowers(recorded: &quota::Usage, used: &quota::Usage) -> bool {
    used.iter()
        .any(|(k, v)| recorded.get(k).is_some_and(|r| v < r))
}

#[cfg(test)]
mod tests {
    use super::{collection_of, lowers};

    #[test]
    fn only_a_count_below_the_recorded_use_gives_a_place_back() {
        let usage = |pods: i128, cpu: i128| {
            [
                ("pods".to_string(), pods * 1000),
                ("requests.cpu".to_string(), cpu),
            ]
            .into()
        };
        let recorded = usage(2, 500);
        assert!(!lowers(&recorded, &usage(2, 500)));
        assert!(!lowers(&recorded, &usage(3, 750)));
        assert!(lowers(&recorded, &usage(1, 500)));
        assert!(lowers(&recorded, &usage(2, 250)));
    }

    #[test]
    fn quota_names_map_to_the_collections_that_use_them() {
        let c = |n: &str| collection_of(n).map(|(g, p)| format!("{g}/{p}"));
        assert_eq!(c("pods").as_deref(), Some("/pods"));
        assert_eq!(c("requests.cpu").as_deref(), Some("/pods"));
        assert_eq!(c("limits.memory").as_deref(), Some("/pods"));
        assert_eq!(c("requests.nvidia.com/gpu").as_deref(), Some("/pods"));
        assert_eq!(c("services.nodeports").as_deref(), Some("/services"));
        assert_eq!(
            c("requests.storage").as_deref(),
            Some("/persistentvolumeclaims")
        );
        assert_eq!(
            c("count/deployments.apps").as_deref(),
            Some("apps/deployments")
        );
        assert_eq!(c("count/secrets").as_deref(), Some("/secrets"));
        assert_eq!(c("configmaps").as_deref(), Some("/configmaps"));
    }
}
