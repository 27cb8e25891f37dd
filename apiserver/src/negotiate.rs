//! Content negotiation: what the client asked for in Accept, and how its body is encoded.

use crate::status::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    /// meta.k8s.io/v1 Table (kubectl get).
    Table,
    /// PartialObjectMetadata(List) (kube-rs metadata watches).
    Metadata,
}

/// Picks the first media type in Accept that this server can produce.
pub fn output(accept: Option<&str>) -> Output {
    let Some(accept) = accept else {
        return Output::Json;
    };
    for part in accept.split(',') {
        let mut params = part.split(';').map(str::trim);
        let mt = params.next().unwrap_or("");
        if !(mt == "application/json" || mt == "*/*" || mt == "application/*") {
            continue;
        }
        let mut as_ = None;
        let mut version = None;
        for p in params {
            if let Some(v) = p.strip_prefix("as=") {
                as_ = Some(v);
            } else if let Some(v) = p.strip_prefix("v=") {
                version = Some(v);
            }
        }
        match (as_, version) {
            (None, _) => return Output::Json,
            (Some("Table"), Some("v1")) => return Output::Table,
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("v1")) => {
                return Output::Metadata
            }
            _ => continue,
        }
    }
    Output::Json
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

pub fn patch_type(ct: Option<&str>) -> Result<PatchType, ApiError> {
    let ct = ct.unwrap_or("").split(';').next().unwrap_or("").trim();
    match ct {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media(other)),
    }
}

/// Parses a request body as JSON, or as YAML when the content type says so (or for
/// server-side apply). A body with no content type is taken as JSON.
pub fn parse_body(ct: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let ct = ct.unwrap_or("application/json");
    let mt = ct.split(';').next().unwrap_or("").trim();
    // kubectl's typed clients (kubectl create namespace, deployment, ...) send protobuf.
    if mt == keelson_apimachinery::protobuf::CONTENT_TYPE {
        use keelson_apimachinery::protobuf::{decode, ProtobufError};
        return decode(body).map_err(|e| match e {
            ProtobufError::NoSchema { .. } => ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("{e}; send it as application/json"),
            ),
            other => {
                ApiError::bad_request(format!("the protobuf body could not be decoded: {other}"))
            }
        });
    }
    let known = mt.is_empty()
        || mt == "*/*"
        || mt.starts_with("application/json")
        || mt.ends_with("+json")
        || mt.contains("yaml");
    if !known {
        return Err(ApiError::unsupported_media(mt));
    }
    let yaml = ct.contains("yaml");
    let v: Value = if yaml {
        serde_norway::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the body of the request is not valid YAML: {e}"))
        })?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(output(Some(a)), Output::Table);
        assert_eq!(
            output(Some(
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            )),
            Output::Json
        );
        assert_eq!(
            output(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Output::Metadata
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf, */*")),
            Output::Json
        );
        assert_eq!(output(None), Output::Json);
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        assert_eq!(parse_body(None, b"{nope").unwrap_err().code, 400);
        assert_eq!(
            parse_body(Some("application/yaml"), b"a: [")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            parse_body(Some("application/yaml"), b"a: 1").unwrap()["a"],
            1
        );
    }

    #[test]
    fn patch_types() {
        assert_eq!(
            patch_type(Some("application/strategic-merge-patch+json")).unwrap(),
            PatchType::Strategic
        );
        assert_eq!(patch_type(Some("text/plain")).unwrap_err().code, 415);
    }
}
