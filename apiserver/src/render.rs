//! Response bodies: objects and lists as stored JSON bytes (no re-encoding), Tables for
//! `kubectl get`, and PartialObjectMetadata.

use crate::negotiate::Output;
use crate::object::{partial_metadata, set_path};
use crate::resources::Resource;
use crate::store::{Entry, Rev};
use bytes::{BufMut, Bytes, BytesMut};
use keelson_apiserver_registry::custom::columns as custom_columns;
use serde_json::{json, Value};

pub fn table(res: &Resource, items: &[Entry], rev: Rev, include_object: bool) -> Value {
    let now = chrono::Utc::now();
    // A custom resource prints its version's additionalPrinterColumns.
    let printer: Option<Vec<Value>> = keelson_apiserver_registry::custom::definition(res)
        .and_then(|d| d.version(res.version).map(|v| v.columns.clone()));
    let columns = match &printer {
        Some(p) => custom_columns::columns(p),
        None => keelson_apiserver_registry::columns(res.kind),
    };
    let cols: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "type": c.type_, "format": c.format,
                "description": c.description, "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|e| {
            let cells = match &printer {
                Some(p) => custom_columns::cells(p, &e.obj, now),
                None => keelson_apiserver_registry::cells(res.kind, &e.obj, now),
            };
            let mut row = json!({ "cells": cells });
            if include_object {
                set_path(&mut row, &["object"], partial_metadata(&e.obj));
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": { "resourceVersion": rev.to_string() },
        "columnDefinitions": cols,
        "rows": rows,
    })
}

/// One object in the form the client asked for.
pub fn object(res: &Resource, e: &Entry, out: Output, include_object: bool) -> Bytes {
    match out {
        Output::Json => e.json.clone(),
        Output::Metadata => {
            Bytes::from(serde_json::to_vec(&partial_metadata(&e.obj)).unwrap_or_default())
        }
        Output::Table => Bytes::from(
            serde_json::to_vec(&table(res, std::slice::from_ref(e), e.rev, include_object))
                .unwrap_or_default(),
        ),
    }
}

/// A list; JSON lists are spliced from the stored bytes of each item.
pub fn list(
    res: &Resource,
    items: &[Entry],
    rev: Rev,
    cont: Option<&str>,
    remaining: Option<usize>,
    out: Output,
    include_object: bool,
) -> Bytes {
    let mut meta = json!({ "resourceVersion": rev.to_string() });
    if let Some(c) = cont {
        set_path(&mut meta, &["continue"], json!(c));
    }
    if let Some(r) = remaining {
        set_path(&mut meta, &["remainingItemCount"], json!(r));
    }
    match out {
        Output::Table => {
            let mut t = table(res, items, rev, include_object);
            set_path(&mut t, &["metadata"], meta);
            Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
        }
        Output::Metadata => {
            let items: Vec<Value> = items.iter().map(|e| partial_metadata(&e.obj)).collect();
            let v = json!({
                "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": meta, "items": items,
            });
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        }
        Output::Json => {
            let size: usize = items.iter().map(|e| e.json.len() + 1).sum();
            let mut b = BytesMut::with_capacity(size + 256);
            let head = json!({ "kind": res.list_kind(), "apiVersion": res.api_version(), "metadata": meta });
            let head = serde_json::to_vec(&head).unwrap_or_default();
            // Reopen the header object to append "items".
            b.put_slice(head.strip_suffix(b"}").unwrap_or_default());
            b.put_slice(b",\"items\":[");
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    b.put_u8(b',');
                }
                b.put_slice(&e.json);
            }
            b.put_slice(b"]}");
            b.freeze()
        }
    }
}

/// One watch event line.
pub fn event(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}
