//! HTTPS like a real API server: a cluster CA and a serving certificate for 127.0.0.1/localhost generated at
//! start (rcgen), served with rustls. client-go (kubectl) sends bearer tokens only over TLS, so this is what
//! makes the kubeconfig's token reach the server.
//!
//! The listener also keeps answering plain HTTP on the same port (told apart by the first byte: a TLS record
//! starts with 0x16, an HTTP request with a method letter). A real server would reject those; here the raw-socket
//! tests and benchmarks keep working, while every kubeconfig the emulator writes says `https://`.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot generate the emulator's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot configure TLS: {0}")]
    Config(#[from] rustls::Error),
}

/// The emulator's PKI: the CA clients trust and the server's TLS configuration.
#[derive(Clone)]
pub struct Tls {
    /// PEM of the CA certificate (what `certificate-authority-data` holds, before base64).
    pub ca_pem: String,
    pub acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

/// The names a client may dial: what kube-apiserver's serving certificate carries for a local cluster.
const SERVING_NAMES: &[&str] =
    &["127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubesim"];

impl Tls {
    /// A fresh CA and serving certificate, valid from now on.
    pub fn generate() -> Result<Tls, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name.push(DnType::CommonName, "kubesim-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;

        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(SERVING_NAMES.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), ca.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )?;
        // HTTP/1.1 only: the server speaks nothing else (clients that offer h2 fall back).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { ca_pem: ca.pem(), acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)) })
    }
}

/// The first byte of a TLS handshake record.
pub(crate) const HANDSHAKE_RECORD: u8 = 0x16;
