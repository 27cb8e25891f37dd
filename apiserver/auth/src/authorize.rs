//! Who may do what: the authorizers of `--authorization-mode` (AlwaysAllow, Node, RBAC) asked
//! in order, the first to allow wins; members of system:masters are always allowed (upstream's
//! privileged-group authorizer). Refusals are 403 with upstream's message.

pub use super::attributes::{selector_value, Attributes, ResourceAttributes};
use super::rbac::Rule;
use super::watched::Watched;
use super::{node, policy, User};
use keelson_apimachinery::well_known::MASTERS_GROUP;
use keelson_apiserver_store::Store;
use std::sync::Arc;

/// The authorizers `--authorization-mode` lists, asked in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    #[value(name = "Node")]
    Node,
    #[value(name = "RBAC")]
    Rbac,
}

/// An authorizer's answer; the reason is what upstream shows (allowed) or appends to the
/// Forbidden message (no opinion).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow(String),
    NoOpinion(String),
}

pub struct Authorizer {
    modes: Vec<Mode>,
    /// The RBAC objects and the pod graph; None when neither Node nor RBAC is on.
    watched: Option<Arc<Watched>>,
    node_rules: Vec<Rule>,
}

impl Authorizer {
    pub fn new(modes: &[Mode], store: &Store) -> Authorizer {
        let needs_store = modes.iter().any(|m| matches!(m, Mode::Node | Mode::Rbac));
        Authorizer {
            modes: modes.to_vec(),
            watched: needs_store.then(|| {
                let w = Arc::new(Watched::new(store.clone(), modes.contains(&Mode::Node)));
                w.keep_up();
                w
            }),
            node_rules: policy::roles::node(),
        }
    }

    pub fn decide(&self, user: &User, a: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == MASTERS_GROUP) {
            return Decision::Allow(String::new());
        }
        let mut reasons: Vec<String> = Vec::new();
        for mode in &self.modes {
            let answer = match (mode, &self.watched) {
                (Mode::AlwaysAllow, _) => Ok(String::new()),
                (Mode::Node, Some(w)) if node::node_name(user).is_some() => {
                    w.with_graph(|g| node::authorize(g, &self.node_rules, user, a))
                }
                (Mode::Rbac, Some(w)) => w.rbac().allows(user, a).ok_or_default(),
                _ => Err(String::new()),
            };
            match answer {
                Ok(reason) => return Decision::Allow(reason),
                Err(reason) if !reason.is_empty() => reasons.push(reason),
                Err(_) => {}
            }
        }
        Decision::NoOpinion(reasons.join(", "))
    }

    /// The rules `user` holds in `namespace` (SelfSubjectRulesReview), and whether more may be
    /// allowed than they show (a node: the Node authorizer cannot list its rules).
    pub fn rules(&self, user: &User, namespace: &str) -> (Vec<Rule>, bool) {
        let mut rules = Vec::new();
        let mut incomplete = false;
        for mode in &self.modes {
            match (mode, &self.watched) {
                (Mode::AlwaysAllow, _) => rules.extend(policy::roles::cluster_admin()),
                (Mode::Rbac, Some(w)) => rules.extend(w.rbac().rules(user, namespace)),
                (Mode::Node, _) => incomplete |= node::node_name(user).is_some(),
                _ => {}
            }
        }
        rules.dedup();
        (rules, incomplete)
    }
}

trait OkOrDefault {
    fn ok_or_default(self) -> Result<String, String>;
}

impl OkOrDefault for Option<String> {
    fn ok_or_default(self) -> Result<String, String> {
        self.ok_or_else(String::new)
    }
}

/// Ok, or upstream's Forbidden message for `user`.
pub fn authorize(authz: &Authorizer, user: &User, a: &Attributes) -> Result<(), String> {
    match authz.decide(user, a) {
        Decision::Allow(_) => Ok(()),
        Decision::NoOpinion(reason) => Err(forbidden_message(user, a, &reason)),
    }
}

/// `pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace
/// "default"`, as upstream's authorization filter words it, with the authorizers' reason.
pub fn forbidden_message(user: &User, a: &Attributes, reason: &str) -> String {
    let name = &user.name;
    let suffix = match reason {
        "" => String::new(),
        r => format!(": {r}"),
    };
    let Some(r) = &a.resource else {
        return format!(
            "forbidden: User {name:?} cannot {} path {:?}{suffix}",
            a.verb, a.path
        );
    };
    let mut resource = r.resource.to_string();
    if !r.subresource.is_empty() {
        resource = format!("{resource}/{}", r.subresource);
    }
    let scope = match r.namespace {
        "" => "at the cluster scope".to_string(),
        ns => format!("in the namespace {ns:?}"),
    };
    let why = format!(
        "User {name:?} cannot {} resource {resource:?} in API group {:?} {scope}{suffix}",
        a.verb, r.group
    );
    let qualified = if r.group.is_empty() {
        r.resource.to_string()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    if r.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", r.name)
    }
}

#[cfg(test)]
mod tests;
