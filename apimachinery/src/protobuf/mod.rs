//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) decoded to JSON.
//!
//! kubectl's typed clients (`kubectl create namespace|deployment|configmap|secret|service|...`)
//! send protobuf and do not fall back to JSON on 415, so the API server turns such bodies into
//! the JSON wire form before handling them like any other request.
//!
//! A body is the magic `k8s\0` followed by a runtime.Unknown {typeMeta{apiVersion = 1,
//! kind = 2} = 1, raw = 2, contentEncoding = 3, contentType = 4} whose `raw` is the object's
//! own message. Messages are decoded with hand-written schema tables (`schema`) that mirror
//! upstream's generated.proto field numbers.

mod decode;
mod schema;
mod time;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::Value;

use wire::{Reader, WireType};

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Where in the message tree a decoding error happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub message: &'static str,
    pub field: Option<u32>,
}

impl Location {
    fn new(message: &'static str, field: u32) -> Self {
        Location {
            message,
            field: Some(field),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field {
            Some(n) => write!(f, "field {n} of {}", self.message),
            None => write!(f, "field key in {}", self.message),
        }
    }
}

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ProtobufError {
    #[error("body does not start with the Kubernetes protobuf prefix \"k8s\\0\"")]
    MissingMagic,
    #[error("truncated {0}")]
    Truncated(Location),
    #[error("malformed {at}: {problem}")]
    Malformed { at: Location, problem: String },
    #[error("no protobuf schema for {api_version} {kind}")]
    NoSchema { api_version: String, kind: String },
    #[error("unsupported protobuf envelope: {0}")]
    Envelope(String),
}

/// Decodes a body sent as application/vnd.kubernetes.protobuf. Returns the object as JSON
/// with apiVersion and kind set.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtobufError::MissingMagic)?;
    let unknown = Unknown::parse(envelope)?;
    if !unknown.content_encoding.is_empty() {
        return Err(ProtobufError::Envelope(format!(
            "content encoding {:?}",
            unknown.content_encoding
        )));
    }
    if unknown.kind.is_empty() || unknown.api_version.is_empty() {
        return Err(ProtobufError::Envelope(
            "runtime.Unknown without apiVersion and kind".into(),
        ));
    }
    let mut object = match unknown.content_type.as_str() {
        "" | CONTENT_TYPE => {
            let schema = schema::lookup(&unknown.api_version, &unknown.kind).ok_or_else(|| {
                ProtobufError::NoSchema {
                    api_version: unknown.api_version.clone(),
                    kind: unknown.kind.clone(),
                }
            })?;
            decode::message(schema, unknown.raw)?
        }
        // The envelope may carry a JSON object; no client is known to do so, but it is legal.
        "application/json" => match serde_json::from_slice(unknown.raw) {
            Ok(Value::Object(map)) => map,
            _ => return Err(ProtobufError::Envelope("raw JSON is not an object".into())),
        },
        other => {
            return Err(ProtobufError::Envelope(format!(
                "raw content type {other:?}"
            )))
        }
    };
    object.insert("apiVersion".into(), Value::String(unknown.api_version));
    object.insert("kind".into(), Value::String(unknown.kind));
    Ok(Value::Object(object))
}

/// runtime.Unknown, the envelope around every protobuf object.
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Unknown<'a> {
    fn parse(buf: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut out = Unknown {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
            content_type: String::new(),
        };
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let (number, wire) = key(&mut r, "Unknown")?;
            match (number, wire) {
                (1, WireType::Len) => {
                    let mut meta = Reader::new(len(&mut r, "Unknown", 1)?);
                    while !meta.is_empty() {
                        let (n, w) = key(&mut meta, "TypeMeta")?;
                        match (n, w) {
                            (1, WireType::Len) => {
                                out.api_version = string(&mut meta, "TypeMeta", 1)?
                            }
                            (2, WireType::Len) => out.kind = string(&mut meta, "TypeMeta", 2)?,
                            _ => skip(&mut meta, "TypeMeta", n, w)?,
                        }
                    }
                }
                (2, WireType::Len) => out.raw = len(&mut r, "Unknown", 2)?,
                (3, WireType::Len) => out.content_encoding = string(&mut r, "Unknown", 3)?,
                (4, WireType::Len) => out.content_type = string(&mut r, "Unknown", 4)?,
                _ => skip(&mut r, "Unknown", number, wire)?,
            }
        }
        Ok(out)
    }
}

fn key(r: &mut Reader<'_>, message: &'static str) -> Result<(u32, WireType), ProtobufError> {
    r.key().map_err(|e| decode::wire_error(message, None, e))
}

fn len<'a>(
    r: &mut Reader<'a>,
    message: &'static str,
    field: u32,
) -> Result<&'a [u8], ProtobufError> {
    r.bytes()
        .map_err(|e| decode::wire_error(message, Some(field), e))
}

fn string(r: &mut Reader<'_>, message: &'static str, field: u32) -> Result<String, ProtobufError> {
    let bytes = len(r, message, field)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed {
        at: Location::new(message, field),
        problem: "string is not valid UTF-8".into(),
    })
}

fn skip(
    r: &mut Reader<'_>,
    message: &'static str,
    field: u32,
    wire: WireType,
) -> Result<(), ProtobufError> {
    r.skip(wire)
        .map_err(|e| decode::wire_error(message, Some(field), e))
}
