//! GET /openapi/v3, /openapi/v3/<group-version path> and /openapi/v2, with ETags.

use super::{Doc, ExtraKind};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, StatusCode};

/// kubectl asks for /openapi/v2 in protobuf only (gnostic's encoding, which this server does
/// not write).
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The answer to an OpenAPI path; None for any other path.
pub fn respond(
    path: &str,
    query: &str,
    headers: &HeaderMap,
    extra: &[ExtraKind],
) -> Option<Response> {
    let path = path.trim_end_matches('/');
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let json_ok = accept.is_empty() || accept.contains("json") || accept.contains("*/*");
    if path == "/openapi/v2" {
        if !json_ok && accept.contains(V2_PROTOBUF) {
            // An empty document: kubectl then validates nothing on its side, leaves it to the
            // server (`fieldValidation`), and builds strategic merge patches from its own types.
            // Not upstream's content type: Go's mime parser refuses the "@" in the Accept value.
            return Some(
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/octet-stream")],
                    "",
                )
                    .into_response(),
            );
        }
        return Some(document(
            &super::v2_document(extra),
            query,
            headers,
            json_ok,
        ));
    }
    if path == "/openapi/v3" {
        let body = serde_json::to_vec(&super::v3_discovery(extra)).unwrap_or_default();
        let mut resp = (StatusCode::OK, body).into_response();
        set(&mut resp, header::CONTENT_TYPE, "application/json");
        set(&mut resp, header::CACHE_CONTROL, "no-cache, private");
        return Some(resp);
    }
    let gv = path.strip_prefix("/openapi/v3/")?;
    Some(match super::v3_document(gv, extra) {
        Some(doc) => document(&doc, query, headers, json_ok),
        None => StatusCode::NOT_FOUND.into_response(),
    })
}

/// A document with its ETag: 304 when the client has it, 406 when it wants only protobuf.
fn document(doc: &Doc, query: &str, headers: &HeaderMap, json_ok: bool) -> Response {
    if !json_ok {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    let etag = format!("\"{}\"", doc.hash);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    // A URL with the current hash never changes (upstream's immutable caching).
    let pinned = query.split('&').any(|q| q == format!("hash={}", doc.hash));
    let mut resp = match cached {
        true => StatusCode::NOT_MODIFIED.into_response(),
        false => (StatusCode::OK, doc.body.clone()).into_response(),
    };
    if !cached {
        set(&mut resp, header::CONTENT_TYPE, "application/json");
    }
    set(&mut resp, header::ETAG, &etag);
    let cache = match pinned {
        true => "public, immutable, max-age=31536000",
        false => "no-cache, private",
    };
    set(&mut resp, header::CACHE_CONTROL, cache);
    resp
}

fn set(resp: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(v) = header::HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, headers: &[(header::HeaderName, &str)]) -> Response {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(k.clone(), v.parse().unwrap());
        }
        respond(path, "", &h, &[]).unwrap()
    }

    #[test]
    fn etag_answers_not_modified() {
        let first = get("/openapi/v3/apis/apps/v1", &[]);
        assert_eq!(first.status(), StatusCode::OK);
        let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
        let again = get(
            "/openapi/v3/apis/apps/v1",
            &[(header::IF_NONE_MATCH, &etag)],
        );
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    }

    #[test]
    fn v2_is_json_or_an_empty_protobuf_document() {
        let json = get("/openapi/v2", &[(header::ACCEPT, "application/json")]);
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
        let pb = get("/openapi/v2", &[(header::ACCEPT, V2_PROTOBUF)]);
        assert_eq!(
            pb.headers()[header::CONTENT_TYPE],
            "application/octet-stream"
        );
        let unknown = get("/openapi/v3/apis/widgets.example.com/v1", &[]);
        assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
        let pb3 = get(
            "/openapi/v3/api/v1",
            &[(
                header::ACCEPT,
                "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
            )],
        );
        assert_eq!(pb3.status(), StatusCode::NOT_ACCEPTABLE);
    }
}
