//! The OpenAPI documents: one OpenAPI 3.0 document per group version (what `kubectl explain`
//! reads), and one Swagger 2.0 document for all (for older tools).

use super::components::{rewrite_refs, Components, KindSchema, V2_REFS, V3_REFS};
use serde_json::{json, Map, Value};

/// The `info.version` of the documents: the version /version reports.
const VERSION: &str = concat!("v1.32.0-keelson-", env!("CARGO_PKG_VERSION"));

/// The key of a group version in /openapi/v3: "api/v1" or "apis/apps/v1".
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The OpenAPI 3 document of the kinds under one group-version path.
pub fn v3(c: &Components, gv_path: &str) -> Option<Value> {
    let kinds: Vec<&KindSchema> = c
        .kinds
        .iter()
        .filter(|k| group_version_path(&k.group, &k.version) == gv_path)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for k in &kinds {
        paths.extend(kind_paths(k, V3_REFS));
    }
    let schemas = c.closure(kinds.iter().map(|k| k.name.as_str()));
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": VERSION },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

/// The Swagger 2.0 document of every kind.
pub fn v2(c: &Components) -> Value {
    let mut paths = Map::new();
    for k in &c.kinds {
        paths.extend(kind_paths(k, V2_REFS));
    }
    let mut definitions = Value::Object(c.schemas.clone());
    rewrite_refs(&mut definitions, V3_REFS, V2_REFS);
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": VERSION },
        "paths": paths,
        "definitions": definitions,
    })
}

/// A kind's collection and item paths. Each operation carries the kind's GVK (one object, as
/// upstream) and writes list `fieldValidation`, which tells kubectl to leave validation to the
/// server. PATCH does not offer strategic merge: the schemas lack upstream's patch strategies,
/// and without them kubectl would compute strategic patches that replace lists; kubectl then
/// builds them from its compiled-in types, as before this document existed.
fn kind_paths(k: &KindSchema, refs: &str) -> Vec<(String, Value)> {
    let base = match (k.group.is_empty(), k.namespaced) {
        (true, false) => format!("/api/{}/{}", k.version, k.plural),
        (true, true) => format!("/api/{}/namespaces/{{namespace}}/{}", k.version, k.plural),
        (false, false) => format!("/apis/{}/{}/{}", k.group, k.version, k.plural),
        (false, true) => format!(
            "/apis/{}/{}/namespaces/{{namespace}}/{}",
            k.group, k.version, k.plural
        ),
    };
    let op = |id: &str, writes: bool| operation(k, refs, id, writes);
    let mut collection = Map::new();
    collection.insert("post".into(), op("create", true));
    if k.create_only {
        return vec![(base, Value::Object(collection))];
    }
    collection.insert("get".into(), op("list", false));
    let item = json!({
        "get": op("read", false),
        "put": op("replace", true),
        "patch": op("patch", true),
        "delete": op("delete", false),
    });
    vec![
        (base.clone(), Value::Object(collection)),
        (format!("{base}/{{name}}"), item),
    ]
}

fn operation(k: &KindSchema, refs: &str, verb: &str, writes: bool) -> Value {
    let schema = json!({ "$ref": format!("{refs}{}", k.name) });
    let mut params =
        vec![json!({ "name": "dryRun", "in": "query", "schema": { "type": "string" } })];
    if writes {
        params.push(json!({
            "name": "fieldValidation",
            "in": "query",
            "description": "Strict, Warn (the default) or Ignore: what the server does with unknown and duplicate fields.",
            "schema": { "type": "string", "uniqueItems": true },
        }));
    }
    let mut op = json!({
        "operationId": format!("{verb}{}", k.kind),
        "parameters": params,
        "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": schema } } } },
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": { "group": k.group, "version": k.version, "kind": k.kind },
    });
    let body_types: &[&str] = match verb {
        "patch" => &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ],
        "create" | "replace" => &["application/json", "application/yaml"],
        _ => &[],
    };
    if !body_types.is_empty() {
        let content: Map<String, Value> = body_types
            .iter()
            .map(|t| (t.to_string(), json!({ "schema": schema })))
            .collect();
        crate::object::set_path(
            &mut op,
            &["requestBody"],
            json!({ "content": content, "required": true }),
        );
    }
    op
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::components::built_in;
    use std::time::Instant;

    #[test]
    fn core_document_has_pods_paths_with_field_validation_and_schemas() {
        let start = Instant::now();
        let c = built_in();
        let built = start.elapsed();
        let doc = v3(&c, "api/v1").unwrap();
        let bytes = serde_json::to_vec(&doc).unwrap();
        // Printed for the record (cargo test -- --nocapture), not asserted.
        println!(
            "components of every kind: {built:?}; api/v1 OpenAPI v3 document: {} bytes in {:?}",
            bytes.len(),
            start.elapsed() - built
        );
        assert_eq!(doc["openapi"], "3.0.0");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({ "group": "", "version": "v1", "kind": "Pod" })
        );
        let names: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&"fieldValidation"), "{names:?}");
        assert!(doc["paths"]["/api/v1/nodes/{name}"]["get"].is_object());
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.core.v1.Container"));
        assert!(!schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
    }

    #[test]
    fn reviews_are_create_only_and_unknown_group_versions_have_no_document() {
        let c = built_in();
        let doc = v3(&c, "apis/authentication.k8s.io/v1").unwrap();
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(paths.len(), 1);
        assert!(paths["/apis/authentication.k8s.io/v1/tokenreviews"]["post"].is_object());
        assert!(v3(&c, "apis/widgets.example.com/v1").is_none());
    }

    #[test]
    fn swagger_refs_point_at_definitions() {
        let c = built_in();
        let doc = v2(&c);
        assert_eq!(doc["swagger"], "2.0");
        let spec = &doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"];
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
        assert!(!serde_json::to_string(&doc)
            .unwrap()
            .contains("#/components/"));
    }
}
