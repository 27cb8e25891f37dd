//! CustomResourceDefinitions: what a stored definition serves (one `Resource` per served
//! version, its schema, printer columns and subresources), the checks on the definition itself,
//! and (in `schema`) the structural-schema pruning, defaulting and validation of its objects.

pub mod cel;
pub mod columns;
pub mod schema;

use crate::cause::Cause;
use crate::path::Path;
use crate::resources::Resource;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};

/// The scale subresource's paths (spec.subresources.scale).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One version of a definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub schema: Value,
    pub columns: Vec<Value>,
    pub status: bool,
    pub scale: Option<ScalePaths>,
}

/// A stored CustomResourceDefinition, as the server acts on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<Version>,
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn texts(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Definition {
    pub fn from_crd(crd: &Value) -> Option<Definition> {
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)?
            .iter()
            .map(|v| Version {
                name: text(v, "/name"),
                served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                schema: v
                    .pointer("/schema/openAPIV3Schema")
                    .cloned()
                    .unwrap_or(Value::Null),
                columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                status: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").map(|s| ScalePaths {
                    spec_replicas: text(s, "/specReplicasPath"),
                    status_replicas: text(s, "/statusReplicasPath"),
                    label_selector: s
                        .get("labelSelectorPath")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                }),
            })
            .collect();
        Some(Definition {
            group: text(crd, "/spec/group"),
            plural: text(crd, "/spec/names/plural"),
            singular: text(crd, "/spec/names/singular"),
            kind: text(crd, "/spec/names/kind"),
            short_names: texts(crd, "/spec/names/shortNames"),
            categories: texts(crd, "/spec/names/categories"),
            namespaced: text(crd, "/spec/scope") == "Namespaced",
            versions,
        })
    }

    pub fn version(&self, name: &str) -> Option<&Version> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// The served versions, storage version first.
    fn served(&self) -> Vec<&Version> {
        let mut out: Vec<&Version> = self.versions.iter().filter(|v| v.served).collect();
        out.sort_by_key(|v| !v.storage);
        out
    }

    /// One Resource per served version, interned.
    pub fn resources(&self) -> Vec<&'static Resource> {
        let singular = if self.singular.is_empty() {
            self.kind.to_lowercase()
        } else {
            self.singular.clone()
        };
        self.served()
            .into_iter()
            .map(|v| {
                let mut subs = Vec::new();
                if v.status {
                    subs.push("status".to_string());
                }
                if v.scale.is_some() {
                    subs.push("scale".to_string());
                }
                intern(Resource {
                    group: leak(&self.group),
                    version: leak(&v.name),
                    plural: leak(&self.plural),
                    singular: leak(&singular),
                    kind: leak(&self.kind),
                    namespaced: self.namespaced,
                    short_names: leak_list(&self.short_names),
                    subresources: leak_list(&subs),
                    in_all: self.categories.iter().any(|c| c == "all"),
                    decode: any_object,
                })
            })
            .collect()
    }
}

/// Custom objects are JSON as their schema says; `schema` checks them, not a Rust type.
fn any_object(_: &Value) -> Result<(), Cause> {
    Ok(())
}

/// Strings and resources live as long as the process: a definition changed back and forth
/// reuses what it leaked the first time, so the leak is bounded by the distinct definitions.
static STRINGS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
static INTERNED: Mutex<Vec<&'static Resource>> = Mutex::new(Vec::new());

pub(crate) fn leak(s: &str) -> &'static str {
    let Ok(mut set) = STRINGS.lock() else {
        return Box::leak(s.to_string().into_boxed_str());
    };
    let set = set.get_or_insert_with(HashSet::new);
    if let Some(found) = set.get(s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

fn leak_list(list: &[String]) -> &'static [&'static str] {
    if list.is_empty() {
        return &[];
    }
    let v: Vec<&'static str> = list.iter().map(|s| leak(s)).collect();
    Box::leak(v.into_boxed_slice())
}

fn same(a: &Resource, b: &Resource) -> bool {
    a == b
        && a.kind == b.kind
        && a.singular == b.singular
        && a.namespaced == b.namespaced
        && a.short_names == b.short_names
        && a.subresources == b.subresources
        && a.in_all == b.in_all
}

fn intern(r: Resource) -> &'static Resource {
    let Ok(mut all) = INTERNED.lock() else {
        return Box::leak(Box::new(r));
    };
    if let Some(found) = all.iter().find(|x| same(x, &r)) {
        return found;
    }
    let leaked: &'static Resource = Box::leak(Box::new(r));
    all.push(leaked);
    leaked
}

/// The definitions in effect, as the server last loaded them from the store.
static DEFINITIONS: RwLock<Vec<Arc<Definition>>> = RwLock::new(Vec::new());

/// Puts `crds` (the stored CustomResourceDefinitions) in effect: their resources served, their
/// schemas applied.
pub fn load(crds: &[Value]) {
    let defs: Vec<Arc<Definition>> = crds
        .iter()
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(Definition::from_crd)
        .map(Arc::new)
        .collect();
    let resources = defs.iter().flat_map(|d| d.resources()).collect();
    if let Ok(mut d) = DEFINITIONS.write() {
        *d = defs;
    }
    crate::resources::set_custom(resources);
}

/// Every definition in effect.
pub fn definitions() -> Vec<Arc<Definition>> {
    DEFINITIONS.read().map(|d| d.clone()).unwrap_or_default()
}

/// The definition serving `r`, if it is a custom resource.
pub fn definition(r: &Resource) -> Option<Arc<Definition>> {
    DEFINITIONS
        .read()
        .ok()?
        .iter()
        .find(|d| d.group == r.group && d.plural == r.plural)
        .cloned()
}

/// The categories of a custom resource (spec.names.categories), "all" excepted.
pub fn categories(r: &Resource) -> Vec<String> {
    definition(r)
        .map(|d| {
            d.categories
                .iter()
                .filter(|c| *c != "all")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Upstream's ValidateCustomResourceDefinition, the parts that keep the server sound: the
/// name is <plural>.<group>, the scope known, one storage version among served ones, a
/// structural schema per version.
pub(crate) fn validate_crd(crd: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec = Path::root().child("spec");
    let name = text(crd, "/metadata/name");
    let (group, plural) = (text(crd, "/spec/group"), text(crd, "/spec/names/plural"));
    if group.is_empty() {
        out.push(Cause::required(spec.child("group"), ""));
    } else if !group.contains('.') {
        out.push(Cause::invalid(
            spec.child("group"),
            &Value::String(group.clone()),
            "should be a domain with at least one dot",
        ));
    }
    for (field, v) in [
        ("plural", &plural),
        ("kind", &text(crd, "/spec/names/kind")),
    ] {
        if v.is_empty() {
            out.push(Cause::required(spec.child("names").child(field), ""));
        }
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        out.push(Cause::invalid(
            Path::root().child("metadata").child("name"),
            &Value::String(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = crd.pointer("/spec/scope").cloned().unwrap_or(Value::Null);
    if !matches!(scope.as_str(), Some("Namespaced" | "Cluster")) {
        out.push(Cause::not_supported(
            spec.child("scope"),
            &scope,
            &["Cluster", "Namespaced"],
        ));
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let versions = versions.map(Vec::as_slice).unwrap_or_default();
    if versions.is_empty() {
        out.push(Cause::required(
            spec.child("versions"),
            "must have exactly one version marked as storage version",
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        out.push(Cause::invalid(
            spec.child("versions"),
            &Value::from(versions.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        let at = spec.child("versions").index(i);
        let vname = text(v, "/name");
        if !seen.insert(vname.clone()) {
            out.push(Cause::duplicate(
                at.child("name"),
                &Value::String(vname.clone()),
            ));
        }
        if v.get("storage").and_then(Value::as_bool) == Some(true)
            && v.get("served").and_then(Value::as_bool) != Some(true)
        {
            out.push(Cause::invalid(
                at.child("served"),
                &Value::Bool(false),
                "the storage version must be served",
            ));
        }
        match v.pointer("/schema/openAPIV3Schema") {
            None => out.push(Cause::required(
                at.child("schema").child("openAPIV3Schema"),
                "schemas are required",
            )),
            Some(s) => schema::structural(s, &at.child("schema").child("openAPIV3Schema"), out),
        }
    }
    if let Some(old) = old {
        for (field, pointer) in [
            ("group", "/spec/group"),
            ("names.plural", "/spec/names/plural"),
            ("scope", "/spec/scope"),
        ] {
            if old.pointer(pointer) != crd.pointer(pointer) && field != "names.plural" {
                out.push(Cause::invalid(
                    spec.child(field),
                    crd.pointer(pointer).unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
    }
}
