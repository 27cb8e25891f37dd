//! GET and LIST: selectors, paging with continue tokens, from the committed objects in memory.

use super::{Api, Target};
use crate::object;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Rev};
use base64::Engine;
use keelson_apimachinery::fields::FieldSelector;
use keelson_apimachinery::labels::LabelSelector;
use serde::Deserialize;

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: Option<String>,
    pub allow_watch_bookmarks: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: Option<String>,
    pub include_object: Option<String>,
    pub dry_run: Option<String>,
    pub field_manager: Option<String>,
    pub force: Option<String>,
    pub propagation_policy: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub pretty: Option<String>,
}

pub fn is_true(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true" | "1" | "True"))
}

/// Parsed label and field selectors of a list or watch.
pub struct Filter {
    labels: LabelSelector,
    fields: Option<FieldSelector>,
    /// No selector: everything matches without parsing the object.
    everything: bool,
}

impl Filter {
    pub fn new(p: &ListParams) -> ApiResult<Filter> {
        let labels = match p.label_selector.as_deref() {
            Some(s) if !s.is_empty() => LabelSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
            _ => LabelSelector::everything(),
        };
        let fields = match p.field_selector.as_deref() {
            Some(s) if !s.is_empty() => Some(
                FieldSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?,
            ),
            _ => None,
        };
        let everything = [&p.label_selector, &p.field_selector]
            .iter()
            .all(|s| s.as_deref().is_none_or(str::is_empty));
        Ok(Filter {
            labels,
            fields,
            everything,
        })
    }

    /// Whether a stored entry matches; parses it only when a selector needs to look.
    pub fn matches_entry(&self, e: &Entry) -> bool {
        self.everything || self.matches(&e.value())
    }

    pub fn matches(&self, obj: &serde_json::Value) -> bool {
        self.labels.matches(object::labels(obj))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }
}

/// A resourceVersion newer than the store's, as upstream's watch cache answers it once it has
/// waited for it in vain: 504 Timeout with a ResourceVersionTooLarge cause; clients retry.
pub fn too_large(asked: Rev, current: Rev) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {asked}, current: {current}"),
    );
    e.details = Some(serde_json::json!({
        "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
        "retryAfterSeconds": 1,
    }));
    e
}

/// The store's revision, unless the list asks for a newer one than the store has.
fn not_older_than(api: &Api, p: &ListParams) -> ApiResult<()> {
    let asked = match p.resource_version.as_deref() {
        None | Some("") | Some("0") => return Ok(()),
        Some(s) => s
            .parse::<Rev>()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}")))?,
    };
    let current = api.store.current_rev();
    if asked > current {
        return Err(too_large(asked, current));
    }
    Ok(())
}

pub fn get(api: &Api, t: &Target) -> ApiResult<Entry> {
    api.get_entry(t)
}

/// The prefix of keys a list or watch covers: one namespace, or all.
pub fn prefix(t: &Target) -> String {
    if t.res.namespaced && !t.namespace.is_empty() {
        format!("{}{}/", t.res.key_prefix(), t.namespace)
    } else {
        t.res.key_prefix()
    }
}

/// A page of a list and the token for the next one.
pub struct Page {
    pub items: Vec<Entry>,
    pub rev: Rev,
    pub continue_: Option<String>,
    pub remaining: Option<usize>,
}

/// The token of the page after the one ending at store key `last`.
fn continue_token(last: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last)
}

fn decode_continue(token: &str) -> ApiResult<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| ApiError::bad_request("invalid continue token"))?;
    String::from_utf8(bytes).map_err(|_| ApiError::bad_request("invalid continue token"))
}

/// The matching entries with their store keys, in key order.
fn keyed_entries(
    api: &Api,
    t: &Target,
    p: &ListParams,
    filter: &Filter,
    after: Option<&str>,
) -> ApiResult<(Vec<(String, Entry)>, Rev)> {
    not_older_than(api, p)?;
    let (items, rev) = api.store.list_keyed(&prefix(t));
    let items = items
        .into_iter()
        .filter(|(k, _)| after.is_none_or(|a| k.as_str() > a))
        .filter(|(_, e)| filter.matches_entry(e))
        .collect();
    Ok((items, rev))
}

pub fn list_entries(api: &Api, t: &Target, p: &ListParams) -> ApiResult<(Vec<Entry>, Rev)> {
    let (items, rev) = keyed_entries(api, t, p, &Filter::new(p)?, None)?;
    Ok((items.into_iter().map(|(_, e)| e).collect(), rev))
}

pub fn list(api: &Api, t: &Target, p: &ListParams) -> ApiResult<Page> {
    let after = match p.continue_.as_deref() {
        Some(c) if !c.is_empty() => Some(decode_continue(c)?),
        _ => None,
    };
    let filter = Filter::new(p)?;
    if let Some(limit) = p.limit.filter(|l| *l > 0 && filter.everything) {
        return page(api, t, p, after.as_deref(), limit);
    }
    let (mut items, rev) = keyed_entries(api, t, p, &filter, after.as_deref())?;
    let mut continue_ = None;
    let mut remaining = None;
    if let Some(limit) = p.limit.filter(|l| *l > 0 && *l < items.len()) {
        let rest = items.split_off(limit);
        let last = items.last().map(|(k, _)| k.as_str()).unwrap_or_default();
        continue_ = Some(continue_token(last));
        remaining = Some(rest.len());
    }
    Ok(Page {
        items: items.into_iter().map(|(_, e)| e).collect(),
        rev,
        continue_,
        remaining,
    })
}

/// A page of a list without selectors, copied alone from the store.
fn page(
    api: &Api,
    t: &Target,
    p: &ListParams,
    after: Option<&str>,
    limit: usize,
) -> ApiResult<Page> {
    not_older_than(api, p)?;
    let (items, more, rev) = api.store.page_keyed(&prefix(t), after, limit);
    let continue_ = items
        .last()
        .filter(|_| more > 0)
        .map(|(last, _)| continue_token(last));
    Ok(Page {
        items: items.into_iter().map(|(_, e)| e).collect(),
        rev,
        continue_,
        remaining: (more > 0).then_some(more),
    })
}
