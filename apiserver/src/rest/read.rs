//! GET and LIST: selectors, paging with continue tokens, from the committed objects in memory.

use super::{Api, Target};
use crate::object;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Rev};
use base64::Engine;
use keelson_apimachinery::fields::FieldSelector;
use keelson_apimachinery::labels::LabelSelector;
use serde::{Deserialize, Serialize};

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

/// A continue token: upstream's shape (base64 of this JSON), the list's revision and the key the
/// next page starts at (the last one's key followed by a NUL, the smallest key after it).
#[derive(Serialize, Deserialize)]
struct ContinueToken {
    v: String,
    rv: Rev,
    start: String,
}

/// The token of the page after the one ending at store key `last`, of a list made at `rev`.
fn continue_token(rev: Rev, last: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv: rev,
        start: format!("{last}\0"),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// The revision of the list a token continues and the key its next page comes after. Every page
/// answers with the first page's revision: a client that watches from the last page's (as
/// reflectors do) then also sees what changed in the earlier pages while it read the later ones.
/// Later pages hold the objects as they are now, so an object may appear newer than that
/// revision; the watch then delivers what it already has, which a reflector takes as a no-op.
fn decode_continue(api: &Api, token: &str) -> ApiResult<(Rev, String)> {
    let invalid = || ApiError::bad_request("invalid continue token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid())?;
    let token: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let after = token.start.strip_suffix('\0').ok_or_else(invalid)?;
    if token.v != "meta.k8s.io/v1" {
        return Err(invalid());
    }
    // From another API server further ahead on the same etcd: retry, as for a list at a
    // resourceVersion this server has not seen yet.
    let current = api.store.current_rev();
    if token.rv > current {
        return Err(too_large(token.rv, current));
    }
    // Past the history, a watch from that revision would miss events: start over, as upstream.
    if token.rv < api.store.oldest_rev() {
        return Err(ApiError::gone(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter.",
        ));
    }
    Ok((token.rv, after.to_string()))
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
    let (first_rev, after) = match p.continue_.as_deref() {
        Some(c) if !c.is_empty() => {
            let (rev, after) = decode_continue(api, c)?;
            (Some(rev), Some(after))
        }
        _ => (None, None),
    };
    let filter = Filter::new(p)?;
    let mut page = match p.limit.filter(|l| *l > 0 && filter.everything) {
        Some(limit) => page(api, t, p, after.as_deref(), limit)?,
        None => filtered_page(api, t, p, &filter, after.as_deref())?,
    };
    page.rev = first_rev.unwrap_or(page.rev);
    page.continue_ = page.continue_.map(|last| continue_token(page.rev, &last));
    Ok(page)
}

/// A page (or, without a limit, the whole list) of the entries matching selectors; its
/// `continue_` is the last key, made a token by the caller.
fn filtered_page(
    api: &Api,
    t: &Target,
    p: &ListParams,
    filter: &Filter,
    after: Option<&str>,
) -> ApiResult<Page> {
    let (mut items, rev) = keyed_entries(api, t, p, filter, after)?;
    let mut continue_ = None;
    let mut remaining = None;
    if let Some(limit) = p.limit.filter(|l| *l > 0 && *l < items.len()) {
        let rest = items.split_off(limit);
        continue_ = items.last().map(|(k, _)| k.clone());
        remaining = Some(rest.len());
    }
    Ok(Page {
        items: items.into_iter().map(|(_, e)| e).collect(),
        rev,
        continue_,
        remaining,
    })
}

/// A page of a list without selectors, copied alone from the store; `continue_` as above.
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
        .map(|(last, _)| last.clone());
    Ok(Page {
        items: items.into_iter().map(|(_, e)| e).collect(),
        rev,
        continue_,
        remaining: (more > 0).then_some(more),
    })
}
