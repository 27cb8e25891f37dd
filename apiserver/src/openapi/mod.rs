//! OpenAPI: the schemas of the served kinds, as /openapi/v3 and /openapi/v2 documents
//! (`kubectl explain`, kubectl's choice of server-side field validation), and the
//! `fieldValidation` check of writes against the same schemas.
//!
//! Everything is built once, lazily, from k8s-openapi's `JsonSchema` impls, and cached.
//! Kinds from outside the built-in table (CustomResourceDefinitions, later) come in as
//! `ExtraKind`s at request time: `documents` merges them over a copy of the cached built-in
//! components, and only for the group versions they touch; the built-in documents stay cached.

mod components;
mod document;
mod duplicates;
pub mod endpoints;
mod field_validation;
mod kinds;
mod strict;

pub use field_validation::{Directive, FieldCheck};

use bytes::Bytes;
use components::{Components, KindSchema, V3_REFS};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A kind served besides the built-in ones, with its OpenAPI v3 schema (which may refer to
/// built-in components, e.g. ObjectMeta, as `#/components/schemas/<name>`).
#[derive(Debug, Clone)]
pub struct ExtraKind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub schema: Value,
}

impl ExtraKind {
    /// Upstream's component name for a custom kind: the group reversed, then version and kind
    /// ("com.example.stable.v1.CronTab").
    fn component_name(&self) -> String {
        let group: Vec<&str> = self.group.split('.').rev().collect();
        format!("{}.{}.{}", group.join("."), self.version, self.kind)
    }

    fn kind_schema(&self) -> KindSchema {
        KindSchema {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            namespaced: self.namespaced,
            create_only: false,
            name: self.component_name(),
        }
    }
}

/// A served document and its hash (the ETag, and the `hash` of its discovery URL).
#[derive(Debug, Clone)]
pub struct Doc {
    pub body: Bytes,
    pub hash: String,
}

impl Doc {
    fn of(v: &Value) -> Doc {
        let body = Bytes::from(serde_json::to_vec(v).unwrap_or_default());
        let digest = ring::digest::digest(&ring::digest::SHA512, &body);
        let hash = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
        Doc { body, hash }
    }
}

static COMPONENTS: OnceLock<Components> = OnceLock::new();
static V3: OnceLock<BTreeMap<String, Doc>> = OnceLock::new();
static V2: OnceLock<Doc> = OnceLock::new();

fn built_in() -> &'static Components {
    COMPONENTS.get_or_init(components::built_in)
}

fn built_in_v3() -> &'static BTreeMap<String, Doc> {
    V3.get_or_init(|| {
        let c = built_in();
        gv_paths(c)
            .into_iter()
            .filter_map(|gv| document::v3(c, &gv).map(|d| (gv, Doc::of(&d))))
            .collect()
    })
}

fn gv_paths(c: &Components) -> Vec<String> {
    let mut paths: Vec<String> = c
        .kinds
        .iter()
        .map(|k| document::group_version_path(&k.group, &k.version))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The built-in components with the extra kinds added.
fn with_extra(extra: &[ExtraKind]) -> Components {
    let mut c = built_in().clone();
    for e in extra {
        c.add_kind(e.kind_schema(), Some(e.schema.clone()));
    }
    c
}

/// The v3 document of one group-version path ("api/v1", "apis/apps/v1").
pub fn v3_document(gv_path: &str, extra: &[ExtraKind]) -> Option<Doc> {
    let touched = extra
        .iter()
        .any(|e| document::group_version_path(&e.group, &e.version) == gv_path);
    if !touched {
        return built_in_v3().get(gv_path).cloned();
    }
    document::v3(&with_extra(extra), gv_path).map(|d| Doc::of(&d))
}

/// /openapi/v3: each group version's document URL, with its hash.
pub fn v3_discovery(extra: &[ExtraKind]) -> Value {
    let mut paths: BTreeMap<String, String> = built_in_v3()
        .iter()
        .map(|(gv, d)| (gv.clone(), d.hash.clone()))
        .collect();
    for e in extra {
        let gv = document::group_version_path(&e.group, &e.version);
        if let Some(d) = v3_document(&gv, extra) {
            paths.insert(gv, d.hash);
        }
    }
    let paths: Map<String, Value> = paths
        .into_iter()
        .map(|(gv, hash)| {
            let url = format!("/openapi/v3/{gv}?hash={hash}");
            (gv, json!({ "serverRelativeURL": url }))
        })
        .collect();
    json!({ "paths": paths })
}

/// The Swagger 2.0 document of every kind.
pub fn v2_document(extra: &[ExtraKind]) -> Doc {
    if extra.is_empty() {
        return V2
            .get_or_init(|| Doc::of(&document::v2(built_in())))
            .clone();
    }
    Doc::of(&document::v2(&with_extra(extra)))
}

/// The components and the root schema of a kind, for the field check: a built-in kind's, or a
/// custom one's from its definition; None for a kind without a schema.
fn schemas_of(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'static Map<String, Value>, Value)> {
    let c = built_in();
    let built = c.kinds.iter().find(|k| {
        (k.group.as_str(), k.version.as_str(), k.kind.as_str()) == (group, version, kind)
    });
    let root = match built {
        Some(k) => json!({ "$ref": format!("{V3_REFS}{}", k.name) }),
        None => {
            custom_kinds()
                .into_iter()
                .find(|k| {
                    (k.group.as_str(), k.version.as_str(), k.kind.as_str())
                        == (group, version, kind)
                })?
                .schema
        }
    };
    Some((&c.schemas, root))
}

/// The kinds the CustomResourceDefinitions in effect serve, their schemas as upstream publishes
/// them: the version's structural schema with apiVersion, kind and ObjectMeta added.
pub fn custom_kinds() -> Vec<ExtraKind> {
    let mut out = Vec::new();
    for def in keelson_apiserver_registry::custom::definitions() {
        for v in def.versions.iter().filter(|v| v.served) {
            let mut schema = v.schema.clone();
            if let Some(props) = schema
                .as_object_mut()
                .map(|s| s.entry("properties").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
            {
                props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
                props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
                props.insert("metadata".into(), json!({ "$ref": format!("{V3_REFS}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta") }));
            }
            out.push(ExtraKind {
                group: def.group.clone(),
                version: v.name.clone(),
                kind: def.kind.clone(),
                plural: def.plural.clone(),
                namespaced: def.namespaced,
                schema,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_each_group_version_with_its_hash() {
        let d = v3_discovery(&[]);
        let core = d["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        let hash = &v3_document("api/v1", &[]).unwrap().hash;
        assert_eq!(core, format!("/openapi/v3/api/v1?hash={hash}"));
        assert!(d["paths"]["apis/apps/v1"].is_object());
        assert!(d["paths"]["apis/autoscaling/v2"].is_object());
    }

    #[test]
    fn extra_kinds_join_their_group_version_only() {
        let extra = [ExtraKind {
            group: "stable.example.com".into(),
            version: "v1".into(),
            kind: "CronTab".into(),
            plural: "crontabs".into(),
            namespaced: true,
            schema: json!({
                "type": "object",
                "properties": {
                    "metadata": { "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" },
                    "spec": { "type": "object", "properties": { "cronSpec": { "type": "string" } } },
                },
            }),
        }];
        let d = v3_discovery(&extra);
        assert!(d["paths"]["apis/stable.example.com/v1"].is_object());
        let doc = v3_document("apis/stable.example.com/v1", &extra).unwrap();
        let doc: Value = serde_json::from_slice(&doc.body).unwrap();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["com.example.stable.v1.CronTab"]["x-kubernetes-group-version-kind"][0]["kind"],
            "CronTab"
        );
        assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        assert_eq!(
            v3_document("api/v1", &extra).unwrap().hash,
            v3_document("api/v1", &[]).unwrap().hash
        );
    }
}
