//! A server to run scenarios against: a base URL, a CA bundle (or none: insecure), an admin bearer token; or
//! a kubeconfig (the real control plane's). Steps that present another token get a client without the admin
//! credentials and an explicit `Authorization` header.

use std::path::Path;

use base64::Engine as _;

use crate::Error;

#[derive(Clone)]
pub struct Target {
    /// A short name for reports ("kube-apiserver v1.37.2", "kubesim").
    pub name: String,
    admin: kube::Client,
    bare: kube::Client,
}

impl Target {
    /// `base_url` with its serving certificate checked against `ca_pem` (or not checked when `None`).
    pub async fn direct(name: &str, base_url: &str, ca_pem: Option<&str>, token: &str) -> Result<Target, Error> {
        let cluster_tls = match ca_pem {
            Some(pem) => {
                format!("certificate-authority-data: {}", base64::engine::general_purpose::STANDARD.encode(pem))
            }
            None => "insecure-skip-tls-verify: true".to_string(),
        };
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {base_url}\n    {cluster_tls}\nusers:\n- name: t\n  user:\n    token: {token}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\n"
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).map_err(|e| Error::Target(e.to_string()))?;
        Self::from_parsed(name, kc).await
    }

    /// The current context of the kubeconfig at `path`.
    pub async fn from_kubeconfig(name: &str, path: &Path) -> Result<Target, Error> {
        let kc =
            kube::config::Kubeconfig::read_from(path).map_err(|e| Error::Target(format!("{}: {e}", path.display())))?;
        Self::from_parsed(name, kc).await
    }

    async fn from_parsed(name: &str, kc: kube::config::Kubeconfig) -> Result<Target, Error> {
        let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Target(e.to_string()))?;
        // Answers are compared as they come: no retries on 429/5xx, no compression.
        config.default_retry = false;
        config.disable_compression = true;
        let admin = kube::Client::try_from(config.clone()).map_err(|e| Error::Target(e.to_string()))?;
        config.auth_info = kube::config::AuthInfo::default();
        let bare = kube::Client::try_from(config).map_err(|e| Error::Target(e.to_string()))?;
        Ok(Target { name: name.to_string(), admin, bare })
    }

    /// The admin's client.
    pub fn admin(&self) -> &kube::Client {
        &self.admin
    }

    /// A client presenting no credentials (add an `Authorization` header, or stay anonymous).
    pub fn bare(&self) -> &kube::Client {
        &self.bare
    }
}
