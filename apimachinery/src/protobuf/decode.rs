//! Schema-driven decoding of one protobuf message into a JSON object.

use serde_json::{Map, Value};

use super::schema::{Card, Field, Kind, Message};
use super::time::rfc3339;
use super::wire::{Reader, WireError, WireType};
use super::{Location, ProtobufError};

/// Decodes `buf` as `msg`. Fields the schema does not list are skipped.
pub fn message(msg: &'static Message, buf: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut out = Map::new();
    decode_into(msg, buf, &mut out)?;
    Ok(out)
}

fn decode_into(
    msg: &'static Message,
    buf: &[u8],
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        let (number, wire) = r.key().map_err(|e| wire_error(msg.name, None, e))?;
        let at = |e| wire_error(msg.name, Some(number), e);
        let Some(field) = msg.field(number) else {
            r.skip(wire).map_err(at)?;
            continue;
        };
        let varint_kind = matches!(field.kind, Kind::Int32 | Kind::Int64 | Kind::Bool);
        if varint_kind && wire == WireType::Len && field.card == Card::Repeated {
            // A packed repeated scalar: proto3 writers use this form, Go's proto2 code does not.
            let mut packed = Reader::new(r.bytes().map_err(at)?);
            while !packed.is_empty() {
                let v = packed.varint().map_err(at)?;
                store(out, field, scalar(field.kind, v), false);
            }
            continue;
        }
        let expected = if varint_kind {
            WireType::Varint
        } else {
            WireType::Len
        };
        if wire != expected {
            return Err(ProtobufError::Malformed {
                at: Location::new(msg.name, number),
                problem: format!("{} value, expected {}", wire.name(), expected.name()),
            });
        }
        if varint_kind {
            let v = scalar(field.kind, r.varint().map_err(at)?);
            let zero = matches!(v, Value::Bool(false)) || v.as_i64() == Some(0);
            store(out, field, v, zero);
            continue;
        }
        let bytes = r.bytes().map_err(at)?;
        let location = Location::new(msg.name, number);
        match field.kind {
            Kind::Inline(inner) => decode_into(inner, bytes, out)?,
            Kind::StringMap | Kind::BytesMap | Kind::QuantityMap => {
                let (key, value) = map_entry(field.kind, bytes, &location)?;
                let map = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            _ => {
                let (value, zero) = length_delimited(field.kind, bytes, &location)?;
                store(out, field, value, zero);
            }
        }
    }
    Ok(())
}

/// Puts a decoded value into the object, dropping zero values of Go value fields (see `Card`).
fn store(out: &mut Map<String, Value>, field: &Field, value: Value, zero: bool) {
    match field.card {
        Card::Repeated => {
            let list = out
                .entry(field.json)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = list {
                list.push(value);
            }
        }
        Card::Value if zero => {}
        Card::Value | Card::Pointer => {
            out.insert(field.json.to_string(), value);
        }
    }
}

fn scalar(kind: Kind, v: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(v != 0),
        // Negative int32 values arrive sign-extended to 64 bits; truncation restores them.
        Kind::Int32 => Value::from(v as i64 as i32),
        _ => Value::from(v as i64),
    }
}

/// A length-delimited value and whether it is its type's zero value.
fn length_delimited(
    kind: Kind,
    bytes: &[u8],
    at: &Location,
) -> Result<(Value, bool), ProtobufError> {
    Ok(match kind {
        Kind::Str => {
            let s = utf8(bytes, at)?;
            (Value::String(s.to_string()), s.is_empty())
        }
        Kind::Msg(inner) => (Value::Object(message(inner, bytes)?), false),
        Kind::Bytes => (
            Value::String(crate::base64::encode(bytes)),
            bytes.is_empty(),
        ),
        Kind::Quantity => {
            let s = quantity(bytes)?;
            let zero = s.is_empty();
            (Value::String(s), zero)
        }
        Kind::IntOrString => int_or_string(bytes)?,
        Kind::Time | Kind::MicroTime => time(bytes, matches!(kind, Kind::MicroTime), at)?,
        // Varint kinds, inline structs and maps are handled by the caller.
        _ => (Value::Null, true),
    })
}

fn utf8<'a>(bytes: &'a [u8], at: &Location) -> Result<&'a str, ProtobufError> {
    std::str::from_utf8(bytes).map_err(|_| ProtobufError::Malformed {
        at: at.clone(),
        problem: "string is not valid UTF-8".into(),
    })
}

/// Walks the fields of a small fixed message (map entry, IntOrString, Quantity, Time).
fn fields<'a>(
    name: &'static str,
    bytes: &'a [u8],
    mut visit: impl FnMut(u32, WireType, &mut Reader<'a>) -> Result<bool, WireError>,
) -> Result<(), ProtobufError> {
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        let (number, wire) = r.key().map_err(|e| wire_error(name, None, e))?;
        let handled = visit(number, wire, &mut r).map_err(|e| wire_error(name, Some(number), e))?;
        if !handled {
            r.skip(wire)
                .map_err(|e| wire_error(name, Some(number), e))?;
        }
    }
    Ok(())
}

fn map_entry(kind: Kind, bytes: &[u8], at: &Location) -> Result<(String, Value), ProtobufError> {
    let (mut key, mut value): (&[u8], &[u8]) = (&[], &[]);
    fields("map entry", bytes, |number, wire, r| {
        match (number, wire) {
            (1, WireType::Len) => key = r.bytes()?,
            (2, WireType::Len) => value = r.bytes()?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let key = utf8(key, at)?.to_string();
    let value = match kind {
        Kind::BytesMap => Value::String(crate::base64::encode(value)),
        Kind::QuantityMap => Value::String(quantity(value)?),
        _ => Value::String(utf8(value, at)?.to_string()),
    };
    Ok((key, value))
}

fn quantity(bytes: &[u8]) -> Result<String, ProtobufError> {
    let mut text: &[u8] = &[];
    fields("Quantity", bytes, |number, wire, r| {
        if (number, wire) != (1, WireType::Len) {
            return Ok(false);
        }
        text = r.bytes()?;
        Ok(true)
    })?;
    Ok(utf8(text, &Location::new("Quantity", 1))?.to_string())
}

fn int_or_string(bytes: &[u8]) -> Result<(Value, bool), ProtobufError> {
    let (mut is_string, mut int, mut text): (bool, i32, &[u8]) = (false, 0, &[]);
    fields("IntOrString", bytes, |number, wire, r| {
        match (number, wire) {
            (1, WireType::Varint) => is_string = r.varint()? == 1,
            (2, WireType::Varint) => int = r.varint()? as i64 as i32,
            (3, WireType::Len) => text = r.bytes()?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if is_string {
        let s = utf8(text, &Location::new("IntOrString", 3))?;
        Ok((Value::String(s.to_string()), false))
    } else {
        Ok((Value::from(int), int == 0))
    }
}

fn time(bytes: &[u8], micros: bool, at: &Location) -> Result<(Value, bool), ProtobufError> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    fields("Time", bytes, |number, wire, r| {
        match (number, wire) {
            (1, WireType::Varint) => seconds = r.varint()? as i64,
            (2, WireType::Varint) => nanos = r.varint()? as i64 as i32,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let text = rfc3339(seconds, nanos, micros).ok_or_else(|| ProtobufError::Malformed {
        at: at.clone(),
        problem: format!("time {seconds}s {nanos}ns is out of range"),
    })?;
    Ok((Value::String(text), seconds == 0 && nanos == 0))
}

pub fn wire_error(message: &'static str, field: Option<u32>, e: WireError) -> ProtobufError {
    let at = Location { message, field };
    match e {
        WireError::Truncated => ProtobufError::Truncated(at),
        WireError::VarintTooLong => ProtobufError::Malformed {
            at,
            problem: "varint longer than 10 bytes".into(),
        },
        WireError::UnsupportedWireType(t) => ProtobufError::Malformed {
            at,
            problem: format!("unsupported wire type {t}"),
        },
        WireError::ZeroFieldNumber => ProtobufError::Malformed {
            at,
            problem: "field number 0".into(),
        },
    }
}
