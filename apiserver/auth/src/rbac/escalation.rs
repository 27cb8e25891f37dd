//! Escalation prevention, as upstream's RBAC storage enforces it: a user may write a role only
//! with permissions they hold themselves (or with the `escalate` verb on it), and bind a role
//! only if they hold its permissions (or have the `bind` verb on it). Coverage is checked per
//! single permission, so a "*" is covered only by a "*".

use super::rule::Rule;
use crate::attributes::{Attributes, ResourceAttributes};
use std::borrow::Cow;

/// The single permissions of `servant` that no rule of `owner` allows, compacted.
pub fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    let mut missing: Vec<Rule> = Vec::new();
    for rule in servant {
        for (verb, target) in permissions(rule) {
            let a = match &target {
                Target::Url(path) => Attributes {
                    verb,
                    resource: None,
                    path,
                },
                Target::Resource {
                    group,
                    resource,
                    name,
                } => {
                    let (res, sub) = resource.split_once('/').unwrap_or((resource, ""));
                    Attributes {
                        verb,
                        resource: Some(ResourceAttributes {
                            group,
                            resource: res,
                            subresource: sub,
                            namespace: "",
                            name: Cow::Borrowed(name),
                            field_selector: std::borrow::Cow::Borrowed(""),
                        }),
                        path: "",
                    }
                }
            };
            if !owner.iter().any(|o| o.allows(&a)) {
                add(&mut missing, verb, &target);
            }
        }
    }
    missing
}

enum Target<'a> {
    Url(&'a str),
    Resource {
        group: &'a str,
        resource: &'a str,
        name: &'a str,
    },
}

/// Every (verb, URL) or (verb, group, resource, name) a rule grants.
fn permissions(rule: &Rule) -> Vec<(&str, Target<'_>)> {
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            out.push((verb.as_str(), Target::Url(url)));
        }
        let names: Vec<&str> = match rule.resource_names.is_empty() {
            true => vec![""],
            false => rule.resource_names.iter().map(String::as_str).collect(),
        };
        for group in &rule.api_groups {
            for resource in &rule.resources {
                for name in &names {
                    out.push((
                        verb.as_str(),
                        Target::Resource {
                            group,
                            resource,
                            name,
                        },
                    ));
                }
            }
        }
    }
    out
}

/// Adds one missing permission, joining the verbs of the same group, resource and name.
fn add(missing: &mut Vec<Rule>, verb: &str, target: &Target) {
    let rule = match target {
        Target::Url(u) => Rule::urls(&[], &[u]),
        Target::Resource {
            group,
            resource,
            name,
        } => {
            let r = Rule::resources(&[], &[group], &[resource]);
            match name.is_empty() {
                true => r,
                false => r.named(&[name]),
            }
        }
    };
    match missing.iter_mut().find(|m| {
        Rule {
            verbs: Vec::new(),
            ..(*m).clone()
        } == rule
    }) {
        Some(m) if !m.verbs.iter().any(|v| v == verb) => m.verbs.push(verb.to_string()),
        Some(_) => {}
        None => missing.push(Rule {
            verbs: vec![verb.to_string()],
            ..rule
        }),
    }
}

/// Upstream's compact form of a rule: `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
pub fn compact(rule: &Rule) -> String {
    let quoted = |l: &[String]| {
        let items: Vec<String> = l.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", items.join(" "))
    };
    let mut parts = Vec::new();
    for (name, list) in [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("ResourceNames", &rule.resource_names),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("Verbs", &rule.verbs),
    ] {
        if !list.is_empty() {
            parts.push(format!("{name}:{}", quoted(list)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_only_by_held_permissions() {
        let owner = vec![
            Rule::resources(&["get", "list"], &[""], &["pods", "pods/log"]),
            Rule::resources(&["*"], &["apps"], &["deployments"]),
            Rule::urls(&["get"], &["/api/*"]),
        ];
        let ok = vec![
            Rule::resources(&["get"], &[""], &["pods"]).named(&["web"]),
            Rule::resources(&["delete", "patch"], &["apps"], &["deployments"]),
            Rule::urls(&["get"], &["/api/v1"]),
        ];
        assert_eq!(uncovered(&owner, &ok), vec![]);
        let more = vec![
            Rule::resources(&["get", "delete"], &[""], &["pods", "secrets"]),
            Rule::resources(&["*"], &[""], &["pods"]),
            Rule::urls(&["get"], &["/metrics"]),
        ];
        let missing: Vec<String> = uncovered(&owner, &more).iter().map(compact).collect();
        assert_eq!(
            missing,
            [
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}"#,
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete" "*"]}"#,
                r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#,
            ]
        );
        let names_only = vec![Rule::resources(&["get"], &[""], &["configmaps"]).named(&["a"])];
        let all = vec![Rule::resources(&["get"], &[""], &["configmaps"])];
        assert_eq!(uncovered(&names_only, &all).len(), 1);
        let star = vec![Rule::resources(&["*"], &["*"], &["*"])];
        assert_eq!(
            uncovered(&star, &more).len(),
            1,
            "resource rules do not cover URLs"
        );
    }
}
