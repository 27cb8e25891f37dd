//! Malformed and unsupported bodies are rejected with errors that say where and why.

use super::encoder::{envelope, envelope_raw, meta, Enc};
use crate::protobuf::{decode, ProtobufError};

#[test]
fn body_without_magic_is_rejected() {
    let err = decode(b"{\"kind\":\"Namespace\"}").unwrap_err();
    assert_eq!(err, ProtobufError::MissingMagic);
}

#[test]
fn unknown_kind_names_group_version_and_kind() {
    let body = envelope("apps/v1", "StatefulSet", Enc::new().msg(1, meta("db")));
    let err = decode(&body).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no protobuf schema for apps/v1 StatefulSet"
    );
}

#[test]
fn truncated_field_names_field_and_message() {
    // ObjectMeta field 3 (namespace) announces 10 bytes but carries 2.
    let mut raw_meta = Enc::new().str(1, "x").finish();
    raw_meta.extend([0x1a, 10, b'd', b'e']);
    let mut object = vec![0x0a, raw_meta.len() as u8];
    object.extend(raw_meta);
    let body = envelope_raw("v1", "Namespace", &object);
    let err = decode(&body).unwrap_err();
    assert_eq!(err.to_string(), "truncated field 3 of ObjectMeta");
}

#[test]
fn truncated_envelope_is_an_error() {
    let mut body = envelope("v1", "Namespace", Enc::new().msg(1, meta("x")));
    body.truncate(body.len() - 3);
    assert!(matches!(
        decode(&body).unwrap_err(),
        ProtobufError::Truncated(_)
    ));
}

#[test]
fn wrong_wire_type_is_reported() {
    // ObjectMeta.name (a string) sent as a varint.
    let body = envelope(
        "v1",
        "ConfigMap",
        Enc::new().msg(1, Enc::new().varint(1, 7)),
    );
    let err = decode(&body).unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed field 1 of ObjectMeta: varint value, expected length-delimited"
    );
}

#[test]
fn invalid_utf8_string_is_rejected() {
    let body = envelope(
        "v1",
        "ConfigMap",
        Enc::new().msg(1, Enc::new().bytes(1, &[0xff, 0xfe])),
    );
    let err = decode(&body).unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed field 1 of ObjectMeta: string is not valid UTF-8"
    );
}

#[test]
fn content_encoding_and_foreign_raw_types_are_refused() {
    let gzip = Enc::new()
        .msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap"))
        .bytes(2, &[1, 2, 3])
        .str(3, "gzip");
    let mut body = b"k8s\0".to_vec();
    body.extend(gzip.finish());
    assert_eq!(
        decode(&body).unwrap_err().to_string(),
        "unsupported protobuf envelope: content encoding \"gzip\""
    );

    let yaml = Enc::new()
        .msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap"))
        .bytes(2, b"a: b")
        .str(4, "application/yaml");
    let mut body = b"k8s\0".to_vec();
    body.extend(yaml.finish());
    assert!(matches!(
        decode(&body).unwrap_err(),
        ProtobufError::Envelope(_)
    ));
}

#[test]
fn envelope_without_type_meta_is_refused() {
    let unknown = Enc::new().msg(2, Enc::new().msg(1, meta("x")));
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.finish());
    assert!(matches!(
        decode(&body).unwrap_err(),
        ProtobufError::Envelope(_)
    ));
}
