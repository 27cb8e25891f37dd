//! The stored Roles, ClusterRoles and their bindings, indexed by subject, so a request looks
//! only at the bindings of its user and groups. Rebuilt whenever an RBAC object changes (there
//! are tens of them, and they change rarely); never read from the store per request.

use super::rule::Rule;
use crate::attributes::Attributes;
use crate::User;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// What one binding grants: the rules of its role, in its namespace or cluster-wide.
#[derive(Debug, Clone)]
struct Grant {
    /// None for a ClusterRoleBinding.
    namespace: Option<String>,
    rules: Arc<Vec<Rule>>,
    /// `RoleBinding "name/ns" of ClusterRole "view"`, as upstream's reasons name it.
    source: String,
}

#[derive(Debug, Default)]
pub struct Index {
    by_user: HashMap<String, Vec<Grant>>,
    by_group: HashMap<String, Vec<Grant>>,
}

/// One stored RBAC object: its kind and JSON.
pub type Object<'a> = (&'a str, &'a Value);

fn meta<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn field<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

fn rules_of(obj: &Value) -> Arc<Vec<Rule>> {
    let rules = obj
        .get("rules")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Rule::from_value).collect())
        .unwrap_or_default();
    Arc::new(rules)
}

impl Index {
    pub fn build<'a>(objects: impl IntoIterator<Item = Object<'a>> + Clone) -> Index {
        let mut roles: HashMap<(String, String), Arc<Vec<Rule>>> = HashMap::new();
        let mut cluster_roles: HashMap<String, Arc<Vec<Rule>>> = HashMap::new();
        for (kind, obj) in objects.clone() {
            let name = meta(obj, "name").to_string();
            match kind {
                "Role" => {
                    roles.insert((meta(obj, "namespace").to_string(), name), rules_of(obj));
                }
                "ClusterRole" => {
                    cluster_roles.insert(name, rules_of(obj));
                }
                _ => {}
            }
        }
        let mut index = Index::default();
        for (kind, obj) in objects {
            let namespace = match kind {
                "RoleBinding" => Some(meta(obj, "namespace").to_string()),
                "ClusterRoleBinding" => None,
                _ => continue,
            };
            let Some(role_ref) = obj.get("roleRef") else {
                continue;
            };
            let role_name = field(role_ref, "name");
            let (role_kind, rules) = match (field(role_ref, "kind"), &namespace) {
                ("ClusterRole", _) => ("ClusterRole", cluster_roles.get(role_name)),
                ("Role", Some(ns)) => ("Role", roles.get(&(ns.clone(), role_name.to_string()))),
                _ => continue,
            };
            // A binding to a role that does not exist (yet) grants nothing.
            let Some(rules) = rules else { continue };
            let name = meta(obj, "name");
            let source = match &namespace {
                Some(ns) => format!("RoleBinding \"{name}/{ns}\" of {role_kind} \"{role_name}\""),
                None => format!("ClusterRoleBinding \"{name}\" of {role_kind} \"{role_name}\""),
            };
            let grant = Grant {
                namespace: namespace.clone(),
                rules: rules.clone(),
                source,
            };
            index.add_subjects(obj, namespace.as_deref(), grant);
        }
        index
    }

    fn add_subjects(&mut self, binding: &Value, namespace: Option<&str>, grant: Grant) {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        for s in subjects.into_iter().flatten() {
            let name = field(s, "name");
            match field(s, "kind") {
                "User" => self.by_user.entry(name.into()).or_default(),
                "Group" => self.by_group.entry(name.into()).or_default(),
                "ServiceAccount" => {
                    // A RoleBinding's service account without a namespace is in the
                    // binding's namespace, as upstream reads it.
                    let ns = match field(s, "namespace") {
                        "" => namespace.unwrap_or(""),
                        ns => ns,
                    };
                    let user = format!("system:serviceaccount:{ns}:{name}");
                    self.by_user.entry(user).or_default()
                }
                _ => continue,
            }
            .push(grant.clone());
        }
    }

    /// The grants of `user` that apply in `namespace` ("" for cluster-wide requests: only
    /// ClusterRoleBindings), each with the subject it was found under.
    fn grants<'a>(
        &'a self,
        user: &'a User,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a Grant, String)> + 'a {
        let own = self
            .by_user
            .get(&user.name)
            .into_iter()
            .flatten()
            .map(move |g| (g, format!("User {:?}", user.name)));
        let groups = user.groups.iter().flat_map(move |group| {
            self.by_group
                .get(group)
                .into_iter()
                .flatten()
                .map(move |g| (g, format!("Group {group:?}")))
        });
        own.chain(groups).filter(move |(g, _)| match &g.namespace {
            None => true,
            Some(ns) => !namespace.is_empty() && ns == namespace,
        })
    }

    /// Upstream's reason when a binding allows the request (`RBAC: allowed by ...`), or None.
    pub fn allows(&self, user: &User, a: &Attributes) -> Option<String> {
        let namespace = a.resource.as_ref().map_or("", |r| r.namespace);
        self.grants(user, namespace)
            .find(|(g, _)| g.rules.iter().any(|r| r.allows(a)))
            .map(|(g, subject)| format!("RBAC: allowed by {} to {subject}", g.source))
    }

    /// Every rule `user` holds in `namespace` (and cluster-wide), for SelfSubjectRulesReview.
    pub fn rules(&self, user: &User, namespace: &str) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        for (g, _) in self.grants(user, namespace) {
            for r in g.rules.iter() {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attributes::ResourceAttributes;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn get<'a>(resource: &'a str, namespace: &'a str) -> Attributes<'a> {
        Attributes {
            verb: "get",
            resource: Some(ResourceAttributes {
                group: "",
                resource,
                subresource: "",
                namespace,
                name: "x".into(),
                field_selector: std::borrow::Cow::Borrowed(""),
            }),
            path: "",
        }
    }

    fn objects() -> Vec<(&'static str, Value)> {
        let rule = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
        let rb = |ns: &str, name: &str, kind: &str, role: &str, subjects: Value| {
            json!({"metadata": {"name": name, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                "subjects": subjects})
        };
        vec![
            (
                "ClusterRole",
                json!({"metadata": {"name": "pod-reader"}, "rules": rule.clone()}),
            ),
            (
                "Role",
                json!({"metadata": {"name": "cm", "namespace": "dev"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            ),
            (
                "RoleBinding",
                rb(
                    "dev",
                    "alice-pods",
                    "ClusterRole",
                    "pod-reader",
                    json!([{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "ci"}]),
                ),
            ),
            (
                "RoleBinding",
                rb(
                    "dev",
                    "devs-cm",
                    "Role",
                    "cm",
                    json!([{"kind": "Group", "name": "devs"}]),
                ),
            ),
            (
                "RoleBinding",
                rb(
                    "dev",
                    "dangling",
                    "Role",
                    "missing",
                    json!([{"kind": "User", "name": "bob"}]),
                ),
            ),
            (
                "ClusterRoleBinding",
                rb(
                    "",
                    "ops",
                    "ClusterRole",
                    "pod-reader",
                    json!([{"kind": "Group", "name": "ops"}]),
                ),
            ),
        ]
    }

    fn index() -> Index {
        let objs = objects();
        Index::build(objs.iter().map(|(k, v)| (*k, v)))
    }

    #[test]
    fn role_bindings_apply_in_their_namespace_only() {
        let i = index();
        let alice = user("alice", &[]);
        assert_eq!(
            i.allows(&alice, &get("pods", "dev")).as_deref(),
            Some(
                r#"RBAC: allowed by RoleBinding "alice-pods/dev" of ClusterRole "pod-reader" to User "alice""#
            )
        );
        assert_eq!(i.allows(&alice, &get("pods", "prod")), None);
        assert_eq!(i.allows(&alice, &get("pods", "")), None, "not cluster-wide");
        assert_eq!(i.allows(&alice, &get("configmaps", "dev")), None);
        let dev = user("carol", &["devs"]);
        assert!(i.allows(&dev, &get("configmaps", "dev")).is_some());
        let sa = user("system:serviceaccount:dev:ci", &[]);
        assert!(i.allows(&sa, &get("pods", "dev")).is_some());
        assert_eq!(i.allows(&user("bob", &[]), &get("pods", "dev")), None);
    }

    #[test]
    fn cluster_role_bindings_apply_everywhere() {
        let i = index();
        let ops = user("dave", &["ops"]);
        assert!(i.allows(&ops, &get("pods", "prod")).is_some());
        assert!(i.allows(&ops, &get("pods", "")).is_some());
        assert_eq!(i.rules(&ops, "dev").len(), 1);
        let both = user("alice", &["devs", "ops"]);
        assert_eq!(i.rules(&both, "dev").len(), 2, "duplicates merged");
    }
}
