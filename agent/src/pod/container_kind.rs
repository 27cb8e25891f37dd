//! Which list of a pod's spec a container comes from, kept on the runtime's container as a label.

/// Which list of the pod's spec a container comes from (the CRI label `labels::CONTAINER_KIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    Init,
    Regular,
    /// Added to a running pod (`kubectl debug`): started once, never restarted.
    Ephemeral,
}

impl ContainerKind {
    pub fn label(self) -> &'static str {
        match self {
            ContainerKind::Init => "init",
            ContainerKind::Regular => "regular",
            ContainerKind::Ephemeral => "ephemeral",
        }
    }

    pub fn from_label(label: Option<&str>) -> Self {
        match label {
            Some("init") => ContainerKind::Init,
            Some("ephemeral") => ContainerKind::Ephemeral,
            _ => ContainerKind::Regular,
        }
    }
}
