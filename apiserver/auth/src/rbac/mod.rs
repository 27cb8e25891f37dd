//! RBAC: Roles and ClusterRoles hold rules, RoleBindings and ClusterRoleBindings grant them to
//! users, groups and service accounts. `rule` matches one rule against a request; `index`
//! finds the rules that apply to a user.

pub mod escalation;
pub mod index;
pub mod rule;

pub use index::Index;
pub use rule::Rule;

/// The API group of the RBAC kinds; their keys in the store start with `/{RBAC_GROUP}/`.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
