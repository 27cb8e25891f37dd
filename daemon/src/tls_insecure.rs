//! A TLS client that accepts the server's certificate whatever signed it, used where upstream
//! does not verify either: the kubelet's httpGet probes and hooks (InsecureSkipVerify: the pod's
//! certificate is for its clients, the node has no trust anchor for it), and the API server's
//! connections to kubelets without --kubelet-certificate-authority (agents serve self-signed
//! certificates). The handshake's signature is still checked against the presented certificate.

use std::sync::Arc;

use tokio_rustls::rustls::{self, client::WantsClientCert, ClientConfig, ConfigBuilder};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer as Cert, ServerName, UnixTime};
use rustls::{DigitallySignedStruct as Dss, SignatureScheme};

/// A client configuration, still to be given its client authentication, that trusts any
/// server certificate (see the module's comment for where that is right).
pub fn any_server_certificate(
) -> Result<ConfigBuilder<ClientConfig, WantsClientCert>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = AnyServerCertificate(provider.signature_verification_algorithms);
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier)))
}

#[derive(Debug)]
struct AnyServerCertificate(WebPkiSupportedAlgorithms);

type Signature = Result<HandshakeSignatureValid, rustls::Error>;

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _: &Cert<'_>,
        _: &[Cert<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, msg: &[u8], cert: &Cert<'_>, dss: &Dss) -> Signature {
        rustls::crypto::verify_tls12_signature(msg, cert, dss, &self.0)
    }

    fn verify_tls13_signature(&self, msg: &[u8], cert: &Cert<'_>, dss: &Dss) -> Signature {
        rustls::crypto::verify_tls13_signature(msg, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::PrivateKeyDer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_self_signed_server_is_reached_over_tls() {
        let cert = rcgen::generate_simple_self_signed(vec!["pod.example".to_string()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            tls.write_all(b"hello").await.unwrap();
            tls.shutdown().await.unwrap();
        });

        let config = any_server_certificate().unwrap().with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A name the certificate does not carry either: neither CA nor name is checked.
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        let mut got = String::new();
        tls.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "hello");
        served.await.unwrap();
    }
}
