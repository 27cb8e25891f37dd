//! autoscaling/v1 HorizontalPodAutoscalers: the request is served as the same request on
//! autoscaling/v2 (the stored form), its body converted on the way in and the answer on the
//! way out (`keelson_apiserver_registry::autoscaling_v1`), so both versions see one object.

use super::route::ResourcePath;
use super::{json_value, resource, App, Call};
use crate::resources;
use crate::status::{ApiError, ApiResult};
use axum::body::Bytes;
use axum::response::Response;
use http::{header, Method};
use keelson_apiserver_registry::autoscaling_v1::{to_v1, to_v2};
use serde_json::{json, Value};

pub async fn handle(app: &App, rp: ResourcePath, call: &Call) -> ApiResult<Response> {
    let watch = rp.legacy_watch || crate::auth::authorize::is_watch(call.query());
    // A patch is written against the v1 form, which is not stored; watches would need every
    // event converted. Clients that do either (kubectl apply, edit, get -w) use v2.
    if watch || call.method() == Method::PATCH {
        return Err(ApiError::method_not_allowed(format!(
            "{} of autoscaling/v1 {} is not supported here: use autoscaling/v2",
            if watch { "WATCH" } else { "PATCH" },
            rp.res.plural
        )));
    }
    let stored = resources::versions(rp.res.group)
        .first()
        .and_then(|v| resources::lookup(rp.res.group, v, rp.res.plural))
        .ok_or_else(|| ApiError::internal("autoscaling/v2 is not served"))?;
    let body = match *call.method() {
        Method::POST | Method::PUT => Bytes::from(to_v2(&call.object()?).to_string()),
        _ => call.body.clone(),
    };
    // Tables and metadata-only answers are the same in both versions.
    let accept = call.header(header::ACCEPT).unwrap_or_default();
    let as_is = accept.contains("as=Table") || accept.contains("as=PartialObjectMetadata");
    let inner = Call {
        head: stored_request(call, stored.version, as_is)?,
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
        .map_err(|e| ApiError::internal(format!("reading the autoscaling/v2 answer: {e}")))?;
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Response::from_parts(parts, bytes.into()));
    };
    match v.get("kind").and_then(Value::as_str) {
        Some("HorizontalPodAutoscaler") => v = to_v1(&v),
        Some("HorizontalPodAutoscalerList") => {
            if let Some(list) = v.as_object_mut() {
                list.insert("apiVersion".into(), json!("autoscaling/v1"));
            }
            if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
                items.iter_mut().for_each(|i| *i = to_v1(i));
            }
        }
        _ => {}
    }
    Ok(json_value(parts.status, &v))
}

/// The request's head on the stored version's path, with a JSON body and JSON answer.
fn stored_request(call: &Call, version: &str, as_is: bool) -> ApiResult<http::request::Parts> {
    let path = call
        .path()
        .replacen("/autoscaling/v1/", &format!("/autoscaling/{version}/"), 1);
    let uri = match call.head.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut req = http::Request::builder()
        .method(call.method().clone())
        .uri(uri);
    for (k, v) in &call.head.headers {
        let replaced = [header::CONTENT_TYPE, header::CONTENT_LENGTH, header::ACCEPT];
        if !replaced.contains(k) || (as_is && k == header::ACCEPT) {
            req = req.header(k, v);
        }
    }
    req = req.header(header::CONTENT_TYPE, "application/json");
    if !as_is {
        req = req.header(header::ACCEPT, "application/json");
    }
    let (head, ()) = req
        .body(())
        .map_err(|e| ApiError::bad_request(format!("request: {e}")))?
        .into_parts();
    Ok(head)
}
