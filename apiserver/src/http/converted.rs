//! Kinds served in a version other than the stored one: the request is served as the same
//! request on the stored version, its body converted on the way in and the answer on the way
//! out, so both versions see one object. autoscaling/v1 HorizontalPodAutoscalers convert
//! field by field (`keelson_apiserver_registry::autoscaling_v1`); events.k8s.io/v1 Events are
//! core/v1 Events under other field names (`events_v1`); a custom resource's other versions
//! convert as upstream's `None` strategy does, by apiVersion alone.

use super::route::ResourcePath;
use super::{json_value, resource, App, Call};
use crate::resources::{self, Resource};
use crate::status::{ApiError, ApiResult};
use axum::body::Bytes;
use axum::response::Response;
use futures::StreamExt;
use http::{header, Method};
use keelson_apiserver_registry::autoscaling_v1::{to_v1, to_v2};
use keelson_apiserver_registry::events_v1::{core_field_selector, to_core, to_events};
use serde_json::{json, Value};

/// How an object of one version becomes the stored version's and back.
struct Conversion {
    to_stored: fn(&Value, &str) -> Value,
    from_stored: fn(&Value, &str) -> Value,
    /// Whether a patch written against this version applies as is to the stored form (true
    /// when only apiVersion differs).
    patchable: bool,
    /// Whether a part of an object converts as the whole does (renamed fields only): a merge
    /// patch is converted, and watches are.
    partial: bool,
    /// A field selector on this version's field names, on the stored version's (None: the same).
    field_selector: Option<fn(&str) -> String>,
}

static HPA: Conversion = Conversion {
    to_stored: |v, _| to_v2(v),
    from_stored: |v, _| to_v1(v),
    patchable: false,
    partial: false,
    field_selector: None,
};

static EVENTS: Conversion = Conversion {
    to_stored: to_core,
    from_stored: to_events,
    patchable: false,
    partial: true,
    field_selector: Some(core_field_selector),
};

/// Conversion `None`: the same fields under another apiVersion.
static API_VERSION_ONLY: Conversion = Conversion {
    to_stored: with_api_version,
    from_stored: with_api_version,
    patchable: true,
    partial: true,
    field_selector: None,
};

fn with_api_version(v: &Value, api_version: &str) -> Value {
    let mut out = v.clone();
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
    }
    out
}

pub async fn handle(app: &App, rp: ResourcePath, call: &Call) -> ApiResult<Response> {
    let conversion: &'static Conversion = match (rp.res.group, rp.res.kind) {
        (_, "HorizontalPodAutoscaler") => &HPA,
        (resources::EVENTS_GROUP, _) => &EVENTS,
        _ => &API_VERSION_ONLY,
    };
    let watch = rp.legacy_watch || super::attributes::is_watch(call.query());
    // An HPA patch is written against the v1 form, which is not stored, and its watches would
    // need whole objects converted. Clients that do either (kubectl apply, edit, get -w) use
    // the stored version. A merge patch of renamed fields converts as it is.
    let patch = call.method() == Method::PATCH;
    let merge_patch = patch
        && call
            .header(header::CONTENT_TYPE)
            .is_some_and(|c| c.starts_with("application/merge-patch+json"));
    if watch && conversion.partial {
        return watch_converted(app, rp, call, conversion).await;
    }
    if watch || (patch && !conversion.patchable && !(conversion.partial && merge_patch)) {
        return Err(ApiError::method_not_allowed(format!(
            "{} of {} {} is not supported here: use {}",
            if watch { "WATCH" } else { "PATCH" },
            rp.res.api_version(),
            rp.res.plural,
            stored_version(rp.res)?.api_version(),
        )));
    }
    let stored = stored_version(rp.res)?;
    let (outer, inner_version) = (rp.res.api_version(), stored.api_version());
    // A merge patch naming the version it was written for names the stored one instead; one
    // of renamed fields (events.k8s.io) is converted whole.
    let convert_patch =
        |v: &Value| v.get("apiVersion").is_some() || (merge_patch && !conversion.patchable);
    let body = match *call.method() {
        Method::POST | Method::PUT => {
            Bytes::from((conversion.to_stored)(&call.object()?, &inner_version).to_string())
        }
        Method::PATCH => match serde_json::from_slice::<Value>(&call.body) {
            Ok(v) if convert_patch(&v) => {
                Bytes::from((conversion.to_stored)(&v, &inner_version).to_string())
            }
            _ => call.body.clone(),
        },
        _ => call.body.clone(),
    };
    // Tables and metadata-only answers are the same in both versions.
    let accept = call.header(header::ACCEPT).unwrap_or_default();
    let as_is = accept.contains("as=Table") || accept.contains("as=PartialObjectMetadata");
    let inner = Call {
        head: stored_request(call, rp.res, stored, conversion, as_is, patch)?,
        body,
        user: call.user.clone(),
    };
    let answer = resource::handle(app, ResourcePath { res: stored, ..rp }, &inner).await?;
    if as_is {
        return Ok(answer);
    }
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::internal(format!("reading the {inner_version} answer: {e}")))?;
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Response::from_parts(parts, bytes.into()));
    };
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == rp.res.kind {
        v = (conversion.from_stored)(&v, &outer);
    } else if kind == rp.res.list_kind() {
        if let Some(list) = v.as_object_mut() {
            list.insert("apiVersion".into(), json!(outer));
        }
        if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
            items
                .iter_mut()
                .for_each(|i| *i = (conversion.from_stored)(i, &outer));
        }
    }
    Ok(json_value(parts.status, &v))
}

/// A watch through a version whose objects convert field by field or by apiVersion alone: the
/// stored version's watch, each event's object of the kind converted on the way out (Tables
/// and Status as they are).
async fn watch_converted(
    app: &App,
    rp: ResourcePath,
    call: &Call,
    conversion: &'static Conversion,
) -> ApiResult<Response> {
    let stored = stored_version(rp.res)?;
    let (outer, kind) = (rp.res.api_version(), rp.res.kind);
    let inner = Call {
        head: stored_request(call, rp.res, stored, conversion, true, false)?,
        body: Bytes::new(),
        user: call.user.clone(),
    };
    let answer = resource::handle(app, ResourcePath { res: stored, ..rp }, &inner).await?;
    let (parts, body) = answer.into_parts();
    // The server writes one event per chunk.
    let events = body.into_data_stream().map(move |chunk| {
        chunk.map(|b| match serde_json::from_slice::<Value>(&b) {
            Ok(mut event) => {
                if let Some(obj) = event.get_mut("object") {
                    if obj.get("kind").and_then(Value::as_str) == Some(kind) {
                        *obj = (conversion.from_stored)(obj, &outer);
                    }
                }
                let mut line = event.to_string().into_bytes();
                line.push(b'\n');
                Bytes::from(line)
            }
            Err(_) => b,
        })
    });
    Ok(Response::from_parts(
        parts,
        axum::body::Body::from_stream(events),
    ))
}

/// Where the kind is stored: its group's preferred version, or core/v1 for events.k8s.io.
fn stored_version(res: &Resource) -> ApiResult<&'static Resource> {
    resources::storage_of(res)
        .ok_or_else(|| ApiError::internal(format!("{} is not served", res.plural)))
}

/// The path every request on `res` starts with.
fn path_prefix(res: &Resource) -> String {
    match res.group {
        "" => format!("/api/{}/", res.version),
        group => format!("/apis/{group}/{}/", res.version),
    }
}

/// The request's head on the stored version's path, with a JSON body and JSON answer.
fn stored_request(
    call: &Call,
    res: &Resource,
    stored: &Resource,
    conversion: &Conversion,
    as_is: bool,
    patch: bool,
) -> ApiResult<http::request::Parts> {
    let path = call
        .path()
        .replacen(&path_prefix(res), &path_prefix(stored), 1);
    let uri = match (call.head.uri.query(), conversion.field_selector) {
        (Some(q), Some(convert)) => format!("{path}?{}", stored_query(q, convert)),
        (Some(q), None) => format!("{path}?{q}"),
        (None, _) => path,
    };
    let mut req = http::Request::builder()
        .method(call.method().clone())
        .uri(uri);
    for (k, v) in &call.head.headers {
        let replaced = [header::CONTENT_TYPE, header::CONTENT_LENGTH, header::ACCEPT];
        let kept = (as_is && k == header::ACCEPT) || (patch && k == header::CONTENT_TYPE);
        if !replaced.contains(k) || kept {
            req = req.header(k, v);
        }
    }
    if !patch {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    if !as_is {
        req = req.header(header::ACCEPT, "application/json");
    }
    let (head, ()) = req
        .body(())
        .map_err(|e| ApiError::bad_request(format!("request: {e}")))?
        .into_parts();
    Ok(head)
}

/// A query with its field selector on the stored version's field names.
fn stored_query(query: &str, convert: fn(&str) -> String) -> String {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let pairs: Vec<(String, String)> = pairs
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "fieldSelector" => (k, convert(&v)),
            _ => (k, v),
        })
        .collect();
    serde_urlencoded::to_string(&pairs).unwrap_or_default()
}
