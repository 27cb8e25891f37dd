//! Discovery documents: /api, /apis, /api/v1, /apis/{group}/{version}, and /version.

use crate::object::set_path;
use crate::resources::{self, Resource};
use serde_json::{json, Value};

pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "" }],
    })
}

/// A group with its versions, the preferred one first.
fn group_entry(g: &str) -> Value {
    let versions: Vec<Value> = resources::versions(g)
        .into_iter()
        .map(|v| json!({ "groupVersion": format!("{g}/{v}"), "version": v }))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({ "name": g, "versions": versions, "preferredVersion": preferred })
}

pub fn groups() -> Value {
    let groups: Vec<Value> = resources::groups().into_iter().map(group_entry).collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub fn group(name: &str) -> Option<Value> {
    resources::groups().contains(&name).then(|| {
        let mut g = group_entry(name);
        set_path(&mut g, &["kind"], json!("APIGroup"));
        set_path(&mut g, &["apiVersion"], json!("v1"));
        g
    })
}

/// shortNames and categories, present only when the kind has some.
fn with_names(mut e: Value, r: &Resource) -> Value {
    if !r.short_names.is_empty() {
        set_path(&mut e, &["shortNames"], json!(r.short_names));
    }
    let mut categories = keelson_apiserver_registry::custom::categories(r);
    if r.in_all {
        categories.insert(0, "all".to_string());
    }
    if !categories.is_empty() {
        set_path(&mut e, &["categories"], json!(categories));
    }
    e
}

fn entry(r: &Resource) -> Value {
    let e = json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": r.verbs(),
    });
    with_names(e, r)
}

fn sub_entry(r: &Resource, sub: &str) -> Value {
    let (kind, verbs, group, version): (&str, Vec<&str>, Option<&str>, Option<&str>) = match sub {
        "scale" => (
            "Scale",
            vec!["get", "patch", "update"],
            Some("autoscaling"),
            Some("v1"),
        ),
        "binding" => ("Binding", vec!["create"], None, None),
        // kubectl drain finds the Eviction API's group and version here.
        "eviction" => ("Eviction", vec!["create"], Some("policy"), Some("v1")),
        "log" => ("Pod", vec!["get"], None, None),
        "exec" => ("PodExecOptions", vec!["create", "get"], None, None),
        "attach" => ("PodAttachOptions", vec!["create", "get"], None, None),
        "portforward" => ("PodPortForwardOptions", vec!["create", "get"], None, None),
        "token" => (
            "TokenRequest",
            vec!["create"],
            Some("authentication.k8s.io"),
            Some("v1"),
        ),
        _ => (r.kind, vec!["get", "patch", "update"], None, None),
    };
    let mut e = json!({
        "name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
        "kind": kind, "verbs": verbs,
    });
    if let (Some(g), Some(v)) = (group, version) {
        set_path(&mut e, &["group"], json!(g));
        set_path(&mut e, &["version"], json!(v));
    }
    e
}

pub fn resource_list(group: &str, version: &str) -> Value {
    let mut list = Vec::new();
    for r in resources::in_group(group, version) {
        list.push(entry(r));
        for s in r.subresources {
            list.push(sub_entry(r, s));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list })
}

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": concat!("v1.32.0-keelson-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "rust",
        "compiler": "rustc", "platform": "linux/amd64",
    })
}

/// The aggregated discovery media type kubectl 1.32 asks for first; answering it saves the
/// per-group round trips of the older documents.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn wants_aggregated(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').next().is_some_and(|first| {
            let first = first.replace(' ', "");
            first.contains("g=apidiscovery.k8s.io")
                && first.contains("v=v2")
                && first.contains("as=APIGroupDiscoveryList")
        })
    })
}

fn aggregated_resource(r: &Resource) -> Value {
    let subs: Vec<Value> = r
        .subresources
        .iter()
        .map(|s| {
            let e = sub_entry(r, s);
            let (g, v) = match *s {
                "scale" => ("autoscaling", "v1"),
                "token" => ("authentication.k8s.io", "v1"),
                _ => (r.group, r.version),
            };
            json!({ "subresource": s, "responseKind": { "group": g, "version": v, "kind": e.get("kind") }, "verbs": e.get("verbs") })
        })
        .collect();
    let e = json!({
        "resource": r.plural, "singularResource": r.singular,
        "responseKind": { "group": r.group, "version": r.version, "kind": r.kind },
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "verbs": r.verbs(), "subresources": subs,
    });
    with_names(e, r)
}

/// /api (core only) or /apis (every named group) as an APIGroupDiscoveryList.
pub fn aggregated(core: bool) -> Value {
    let groups: Vec<&str> = if core { vec![""] } else { resources::groups() };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|g| {
            let versions: Vec<Value> = resources::versions(g)
                .into_iter()
                .map(|version| {
                    let res: Vec<Value> = resources::in_group(g, version)
                        .into_iter()
                        .map(aggregated_resource)
                        .collect();
                    json!({ "version": version, "resources": res, "freshness": "Current" })
                })
                .collect();
            json!({ "metadata": { "name": g, "creationTimestamp": null }, "versions": versions })
        })
        .collect();
    json!({ "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_is_autoscaling_v1_and_short_names_present() {
        let apps = resource_list("apps", "v1");
        let res = apps["resources"].as_array().unwrap();
        let scale = res
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(
            (scale["group"].as_str(), scale["kind"].as_str()),
            (Some("autoscaling"), Some("Scale"))
        );
        let deploy = res.iter().find(|r| r["name"] == "deployments").unwrap();
        assert_eq!(deploy["shortNames"], json!(["deploy"]));
        assert_eq!(deploy["categories"], json!(["all"]));
        let core = resource_list("", "v1");
        assert_eq!(core["groupVersion"], "v1");
    }

    /// kubectl picks the preferred version; `kubectl autoscale` still writes the older one.
    #[test]
    fn autoscaling_prefers_v2_and_serves_v1() {
        let g = group("autoscaling").unwrap();
        assert_eq!(g["preferredVersion"]["groupVersion"], "autoscaling/v2");
        let versions: Vec<&str> = g["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["version"].as_str())
            .collect();
        assert_eq!(versions, ["v2", "v1"]);
        let all = aggregated(false);
        let autoscaling = all["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "autoscaling")
            .unwrap();
        assert_eq!(autoscaling["versions"][0]["version"], "v2");
        assert_eq!(autoscaling["versions"][1]["version"], "v1");
    }
}
