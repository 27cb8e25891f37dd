//! The agent's view of the conditions it writes, on its Node and its Pods.

use k8s_openapi::api::core::v1::{NodeCondition, PodCondition};

/// A condition's type and status, whatever the object.
pub trait Condition {
    fn type_and_status(&self) -> (&str, &str);
}

impl Condition for NodeCondition {
    fn type_and_status(&self) -> (&str, &str) {
        (&self.type_, &self.status)
    }
}

impl Condition for PodCondition {
    fn type_and_status(&self) -> (&str, &str) {
        (&self.type_, &self.status)
    }
}

/// The (type, status) pairs of `conditions`, sorted: what the agent compares to see whether
/// someone else changed the conditions it last wrote (node lifecycle sets a lost node's and its
/// pods' Ready to Unknown or False). Reasons, messages and times do not count. Pure.
pub fn states<C: Condition>(conditions: Option<&[C]>) -> Vec<(&str, &str)> {
    let mut states: Vec<(&str, &str)> = conditions
        .unwrap_or_default()
        .iter()
        .map(C::type_and_status)
        .collect();
    states.sort_unstable();
    states
}

#[cfg(test)]
mod tests {
    use super::states;
    use k8s_openapi::api::core::v1::{NodeCondition, PodCondition};

    #[test]
    fn node_conditions_set_unknown_by_node_lifecycle_differ_from_the_posted_ones() {
        let ready = |status: &str, reason: Option<&str>| NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.map(String::from),
            ..Default::default()
        };
        let posted = [ready("True", Some("KubeletReady"))];
        // Other fields (here the reason) do not count; the states do.
        assert_eq!(states(Some(&posted)), states(Some(&[ready("True", None)])));
        let lost = [ready("Unknown", Some("NodeStatusUnknown"))];
        assert_ne!(states(Some(&posted)), states(Some(&lost)));
        assert_ne!(states(Some(&posted)), states::<NodeCondition>(None));
    }

    #[test]
    fn the_order_of_pod_conditions_does_not_count() {
        let condition = |type_: &str| PodCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        };
        let written = [condition("Ready"), condition("PodScheduled")];
        let read = [condition("PodScheduled"), condition("Ready")];
        assert_eq!(states(Some(&written)), states(Some(&read)));
    }
}
