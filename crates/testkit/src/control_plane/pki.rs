//! The control plane's credentials, made fresh for every start: a cluster CA, kube-apiserver's serving certificate
//! for 127.0.0.1, the service-account signing key, and one static bearer token per identity.

use std::fmt::Write as _;
use std::path::Path;

use rand::Rng;
use rand::distr::Alphanumeric;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::{Error, User};

/// What a client may dial: the names kube-apiserver's serving certificate carries for a local cluster.
const SERVING_NAMES: &[&str] =
    &["127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "10.96.0.1"];

pub(super) struct Pki {
    pub ca_pem: String,
    pub users: Vec<(User, String)>,
}

impl Pki {
    /// Writes `ca.crt`, `apiserver.crt`/`.key`, `sa.key`/`.pub` and `tokens.csv` into `dir`.
    pub fn generate(dir: &Path, users: &[User]) -> Result<Pki, Error> {
        let cert_error =
            |e: rcgen::Error| Error::Setup(format!("cannot generate the control plane's certificates: {e}"));
        let ca_key = KeyPair::generate().map_err(cert_error)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_error)?;
        ca_params.distinguished_name.push(DnType::CommonName, "testkit-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(cert_error)?;

        let key = KeyPair::generate().map_err(cert_error)?;
        let names = SERVING_NAMES.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).map_err(cert_error)?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca).map_err(cert_error)?;
        // ECDSA P-256: kube-apiserver signs service-account tokens with ES256 from a PKCS#8 key.
        let sa_key = KeyPair::generate().map_err(cert_error)?;

        let users: Vec<(User, String)> = users.iter().map(|u| (u.clone(), token())).collect();
        let mut csv = String::new();
        for (i, (user, token)) in users.iter().enumerate() {
            // token,user,uid,"group1,group2": kube-apiserver's static token file.
            let _ = writeln!(csv, "{token},{},{},\"{}\"", user.name, i + 1, user.groups.join(","));
        }
        write(dir, "ca.crt", &ca.pem())?;
        write(dir, "apiserver.crt", &cert.pem())?;
        write(dir, "apiserver.key", &key.serialize_pem())?;
        write(dir, "sa.key", &sa_key.serialize_pem())?;
        // kube-apiserver verifies tokens with a public key file; a PKCS#8 private key is not read as one.
        write(dir, "sa.pub", &sa_key.public_key_pem())?;
        write(dir, "tokens.csv", &csv)?;
        Ok(Pki { ca_pem: ca.pem(), users })
    }

    pub fn token(&self, name: &str) -> Option<&str> {
        self.users.iter().find(|(u, _)| u.name == name).map(|(_, t)| t.as_str())
    }
}

fn token() -> String {
    rand::rng().sample_iter(&Alphanumeric).take(40).map(char::from).collect()
}

pub(super) fn write(dir: &Path, name: &str, content: &str) -> Result<(), Error> {
    std::fs::write(dir.join(name), content).map_err(|e| Error::Setup(format!("cannot write {name}: {e}")))
}
