//! One PolicyRule and whether it covers a request, as upstream's rbac.RuleAllows decides:
//! "*" matches any verb, group, resource or URL; "pods/status" names a subresource and
//! "*/status" that subresource of every resource; resourceNames, when given, limit the rule to
//! those names; a non-resource URL ending in "*" covers every path under it.

use crate::attributes::Attributes;
use keelson_apimachinery::object::strings;
use serde_json::{json, Value};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// A rule from a stored Role's `rules[]` entry (validated when it was written).
    pub fn from_value(v: &Value) -> Rule {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// A resource rule: `verbs` on `resources` in `groups`.
    pub fn resources(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: own(verbs),
            api_groups: own(groups),
            resources: own(resources),
            ..Rule::default()
        }
    }

    /// A non-resource rule: `verbs` on `urls`.
    pub fn urls(verbs: &[&str], urls: &[&str]) -> Rule {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: own(verbs),
            non_resource_urls: own(urls),
            ..Rule::default()
        }
    }

    /// The same rule limited to `names`.
    pub fn named(mut self, names: &[&str]) -> Rule {
        self.resource_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The rule as a PolicyRule object; empty lists left out, as upstream serializes them.
    pub fn to_value(&self) -> Value {
        let mut v = json!({ "verbs": self.verbs });
        for (key, list) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !list.is_empty() {
                keelson_apimachinery::object::set_path(&mut v, &[key], json!(list));
            }
        }
        v
    }

    pub fn allows(&self, a: &Attributes) -> bool {
        if !has(&self.verbs, a.verb) {
            return false;
        }
        match &a.resource {
            Some(r) => {
                has(&self.api_groups, r.group)
                    && self.resource_matches(r.resource, r.subresource)
                    && (self.resource_names.is_empty()
                        || self.resource_names.iter().any(|n| *n == r.name))
            }
            None => self
                .non_resource_urls
                .iter()
                .any(|u| url_matches(u, a.path)),
        }
    }

    fn resource_matches(&self, resource: &str, sub: &str) -> bool {
        self.resources.iter().any(|want| {
            if want == "*" {
                return true;
            }
            if sub.is_empty() {
                return want == resource;
            }
            match want.split_once('/') {
                Some((res, s)) => s == sub && (res == "*" || res == resource),
                None => false,
            }
        })
    }
}

fn has(list: &[String], item: &str) -> bool {
    list.iter().any(|v| v == "*" || v == item)
}

fn url_matches(rule: &str, path: &str) -> bool {
    if rule == "*" || rule == path {
        return true;
    }
    rule.strip_suffix('*')
        .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res<'a>(
        verb: &'static str,
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes::on_resource(verb, group, resource, sub, "default", name)
    }

    fn path<'a>(verb: &'static str, path: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            resource: None,
            path,
        }
    }

    #[test]
    fn verbs_groups_and_resources() {
        let r = Rule::resources(&["get", "list"], &["", "apps"], &["pods", "deployments"]);
        assert!(r.allows(&res("get", "", "pods", "", "web")));
        assert!(r.allows(&res("list", "apps", "deployments", "", "")));
        assert!(!r.allows(&res("delete", "", "pods", "", "web")));
        assert!(!r.allows(&res("get", "batch", "pods", "", "web")));
        assert!(!r.allows(&res("get", "", "secrets", "", "s")));
        // A subresource needs its own entry.
        assert!(!r.allows(&res("get", "", "pods", "log", "web")));
        let all = Rule::resources(&["*"], &["*"], &["*"]);
        assert!(all.allows(&res("deletecollection", "x.io", "widgets", "status", "")));
        assert!(
            !all.allows(&path("get", "/healthz")),
            "resource rules never cover URLs"
        );
    }

    #[test]
    fn subresources_and_names() {
        let r = Rule::resources(&["update"], &[""], &["pods/status", "*/scale"]);
        assert!(r.allows(&res("update", "", "pods", "status", "web")));
        assert!(!r.allows(&res("update", "", "pods", "", "web")));
        assert!(r.allows(&res("update", "", "deployments", "scale", "web")));
        assert!(!r.allows(&res("update", "", "nodes", "status", "n1")));
        let named = Rule::resources(&["get"], &[""], &["configmaps"]).named(&["cluster-info"]);
        assert!(named.allows(&res("get", "", "configmaps", "", "cluster-info")));
        assert!(!named.allows(&res("get", "", "configmaps", "", "other")));
        assert!(!named.allows(&res("list", "", "configmaps", "", "")));
    }

    #[test]
    fn non_resource_urls_with_trailing_star() {
        let r = Rule::urls(&["get"], &["/api", "/api/*", "/healthz"]);
        assert!(r.allows(&path("get", "/api")));
        assert!(r.allows(&path("get", "/api/v1")));
        assert!(r.allows(&path("get", "/healthz")));
        assert!(!r.allows(&path("get", "/healthz/etcd")));
        assert!(!r.allows(&path("get", "/apis")));
        assert!(!r.allows(&path("post", "/api")));
        assert!(
            !r.allows(&res("get", "", "pods", "", "")),
            "URL rules never cover resources"
        );
        assert!(Rule::urls(&["*"], &["*"]).allows(&path("delete", "/anything")));
    }

    #[test]
    fn round_trips_through_json() {
        let r = Rule::resources(&["get"], &[""], &["secrets"]).named(&["a"]);
        assert_eq!(
            r.to_value(),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]})
        );
        assert_eq!(Rule::from_value(&r.to_value()), r);
    }
}
