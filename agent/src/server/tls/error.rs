//! What can go wrong loading or making the serving certificate and the client CA.

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no private key in {0}")]
    NoKey(String),
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("client CA {path}: {message}")]
    ClientCa { path: String, message: String },
}
