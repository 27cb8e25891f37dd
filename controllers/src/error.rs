//! What a reconcile or the controller manager can fail with.

use keelson_apimachinery::SelectorError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A Deployment's or ReplicaSet's `spec.selector` that is not a valid label selector.
    #[error("invalid spec.selector: {0}")]
    Selector(#[from] SelectorError),
    /// An object this controller cannot act on (no template, a ReplicaSet that does not build).
    #[error("{0}")]
    Invalid(String),
    /// The controller manager lost its Lease and must stop acting (the process exits).
    #[error(transparent)]
    Leader(#[from] keelson_daemon::leader::LeaderError),
}
