//! The schemas of the served kinds as OpenAPI components, from k8s-openapi's `JsonSchema` impls
//! (which carry upstream's definition names and descriptions).

use super::kinds;
use crate::resources::RESOURCES;
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// Where OpenAPI 3 keeps schemas, and where Swagger 2.0 does.
pub const V3_REFS: &str = "#/components/schemas/";
pub const V2_REFS: &str = "#/definitions/";

/// One kind with a schema: what a path and a GVK extension need.
#[derive(Debug, Clone, PartialEq)]
pub struct KindSchema {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Creatable only (reviews): no item paths.
    pub create_only: bool,
    /// The component's name, e.g. "io.k8s.api.core.v1.Pod".
    pub name: String,
}

/// Every schema by name (OpenAPI 3 form, refs to `V3_REFS`) and the kinds they serve.
#[derive(Debug, Clone, Default)]
pub struct Components {
    pub schemas: Map<String, Value>,
    pub kinds: Vec<KindSchema>,
}

/// The built-in kinds' components. schemars' OpenAPI 3 settings write refs to
/// `#/components/schemas/` and turn a `$ref` with siblings (a field's description) into
/// `allOf: [{$ref}]`, as upstream's documents do.
pub fn built_in() -> Components {
    let mut generator = SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator();
    let mut kinds = Vec::new();
    for r in RESOURCES {
        let Some(add) = kinds::lookup(r.group, r.version, r.kind) else {
            continue;
        };
        kinds.push(KindSchema {
            group: r.group.into(),
            version: r.version.into(),
            kind: r.kind.into(),
            plural: r.plural.into(),
            namespaced: r.namespaced,
            create_only: r.is_review(),
            name: add(&mut generator),
        });
    }
    let mut c = Components {
        schemas: generator.take_definitions(true),
        kinds: Vec::new(),
    };
    for k in kinds {
        c.add_kind(k, None);
    }
    c
}

impl Components {
    /// Adds a kind; `schema` (for kinds from outside, e.g. CustomResourceDefinitions) becomes
    /// its component. Tags the component with the kind's GVK, which `kubectl explain` and
    /// kubectl's field-validation check look for.
    pub fn add_kind(&mut self, k: KindSchema, schema: Option<Value>) {
        if let Some(s) = schema {
            self.schemas.insert(k.name.clone(), s);
        }
        if let Some(Value::Object(s)) = self.schemas.get_mut(&k.name) {
            let gvk = json!({ "group": k.group, "version": k.version, "kind": k.kind });
            let tags = s
                .entry("x-kubernetes-group-version-kind")
                .or_insert_with(|| json!([]));
            if let Value::Array(list) = tags {
                if !list.contains(&gvk) {
                    list.push(gvk);
                }
            }
        }
        self.kinds.push(k);
    }

    /// The named schemas and every schema they refer to, directly or not.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = roots.into_iter().map(String::from).collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(s) = self.schemas.get(&name) {
                refs(s, &mut |r| todo.push(r.to_string()));
            }
        }
        seen.into_iter()
            .filter_map(|n| self.schemas.get(&n).map(|s| (n, s.clone())))
            .collect()
    }
}

/// Calls `found` with the component name of every `$ref` in a schema.
fn refs(v: &Value, found: &mut impl FnMut(&str)) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(V3_REFS) {
                            found(name);
                        }
                    }
                    _ => refs(x, found),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, found)),
        _ => {}
    }
}

/// Rewrites every `$ref` from one prefix to another (OpenAPI 3 to Swagger 2.0).
pub fn rewrite_refs(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(r) if k == "$ref" => {
                        if let Some(name) = r.strip_prefix(from) {
                            *r = format!("{to}{name}");
                        }
                    }
                    _ => rewrite_refs(x, from, to),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs(x, from, to)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_schema_is_tagged_described_and_refers_to_components() {
        let c = built_in();
        let pod = &c.schemas["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{ "group": "", "version": "v1", "kind": "Pod" }])
        );
        assert!(pod.get("$schema").is_none());
        let spec = &pod["properties"]["spec"];
        assert!(spec["description"]
            .as_str()
            .unwrap()
            .contains("desired behavior"));
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodSpec"
        );
        let containers = &c.schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(
            containers["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        let text = serde_json::to_string(&c.schemas).unwrap();
        assert!(!text.contains("$defs"), "every ref points into components");
    }

    #[test]
    fn closure_holds_what_a_kind_refers_to_and_nothing_else() {
        let c = built_in();
        let s = c.closure(["io.k8s.api.apps.v1.Deployment"]);
        assert!(s.contains_key("io.k8s.api.apps.v1.DeploymentStrategy"));
        assert!(s.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(!s.contains_key("io.k8s.api.core.v1.Service"));
    }

    #[test]
    fn refs_are_rewritten_for_swagger() {
        let mut v = json!({ "items": { "$ref": "#/components/schemas/a.B" }, "x": [{ "$ref": "#/components/schemas/c.D" }] });
        rewrite_refs(&mut v, V3_REFS, V2_REFS);
        assert_eq!(v["items"]["$ref"], "#/definitions/a.B");
        assert_eq!(v["x"][0]["$ref"], "#/definitions/c.D");
    }
}
