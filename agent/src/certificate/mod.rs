//! Certificate rotation, as the kubelet's certificate manager: the node's client certificate
//! (and, with --rotate-server-certificates, its serving certificate for port 10250) is renewed
//! through a CertificateSigningRequest at a random point in 70-90% of its lifetime, written
//! where the current one is, and used for new connections without a restart.

pub mod client;
pub mod deadline;
pub mod rotate;
pub mod serving;

/// The node's serving certificate and key, in `--cert-dir`.
pub const SERVER_CERT_FILE: &str = "keelson-agent-server-current.pem";
