//! Errors from talking to the API server, in words a person can act on. kube's own Display gives
//! "ServiceError: client error (Connect)" (the cause is buried in the source chain) or a debug dump of the server's
//! Status; the operator's start-up checks and the plugin's `status`/`wait` print these instead. Also what both
//! binaries share to reach a cluster: loading the kubeconfig, the API of a namespace or of all, and telling a
//! missing CRD from other errors.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// Why no cluster configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The kubeconfig file named on the command line cannot be read or parsed.
    #[error("{reason}")]
    Read { path: String, reason: String },
    /// The named kubeconfig was read, but no configuration (e.g. that context) can be built from it.
    #[error("{reason}")]
    Custom { path: String, reason: String },
    /// Neither in-cluster nor the default kubeconfig gave a configuration.
    #[error("{0}")]
    Default(String),
}

/// `kubeconfig` (with `context`), else `context` in the default kubeconfig, else in-cluster or the default
/// kubeconfig ($KUBECONFIG, ~/.kube/config) as every Kubernetes client does.
pub async fn load_config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Config, ConfigError> {
    let options = KubeConfigOptions { context: context.map(str::to_string), ..KubeConfigOptions::default() };
    match (kubeconfig, context) {
        (Some(path), _) => {
            let path_text = path.display().to_string();
            let file = Kubeconfig::read_from(path)
                .map_err(|e| ConfigError::Read { path: path_text.clone(), reason: e.to_string() })?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| ConfigError::Custom { path: path_text, reason: e.to_string() })
        }
        (None, Some(_)) => {
            kube::Config::from_kubeconfig(&options).await.map_err(|e| ConfigError::Default(e.to_string()))
        }
        (None, None) => kube::Config::infer().await.map_err(|e| ConfigError::Default(e.to_string())),
    }
}

/// The API of `K` in `namespace`, or in every namespace when there is none.
pub fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Whether a list of Microservices failed because the resource type itself is unknown: a 404 on the collection
/// means the CRD is not installed.
pub fn crd_missing(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// One line: what went wrong and what to check.
pub fn describe(err: &kube::Error) -> String {
    if let kube::Error::Api(status) = err {
        return describe_status(status.code, &status.reason, &status.message);
    }
    let chain = source_chain(err);
    let lowered = chain.to_ascii_lowercase();
    if lowered.contains("unknownissuer") || lowered.contains("unknown issuer") {
        return "the API server's certificate is signed by an unknown certificate authority; check the kubeconfig's \
                certificate-authority(-data) for this cluster"
            .to_string();
    }
    if lowered.contains("notvalidforname") || lowered.contains("not valid for name") {
        return format!(
            "the API server's certificate is not valid for the address in the kubeconfig ({chain}); check the \
             cluster's server URL"
        );
    }
    if lowered.contains("certificate") && lowered.contains("expired") {
        return format!("the API server's certificate has expired ({chain})");
    }
    if lowered.contains("connection refused") {
        return "connection refused: nothing listens at the server address; check that the cluster is up".to_string();
    }
    chain
}

/// A refusal by the server, with the server's own message.
pub fn describe_status(code: u16, reason: &str, message: &str) -> String {
    let message = if message.trim().is_empty() { reason } else { message.trim() };
    match code {
        401 => format!(
            "the API server did not accept the credentials (401 Unauthorized: {message}); check the kubeconfig's \
             user (token or client certificate) for this cluster"
        ),
        403 => format!("the API server refused the request (403 Forbidden: {message})"),
        _ if reason.is_empty() => format!("the API server answered {code}: {message}"),
        _ => format!("the API server answered {code} {reason}: {message}"),
    }
}

/// The error and its causes, each once, joined with `: ` (kube's wrappers repeat their inner error's text).
fn source_chain(err: &kube::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(err);
    while let Some(current) = next {
        let text = current.to_string();
        let text = text.strip_prefix("ServiceError: ").unwrap_or(&text).to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = current.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_401_names_the_credentials_and_keeps_the_servers_words() {
        let text = describe_status(401, "Unauthorized", "Unauthorized");
        assert!(text.starts_with("the API server did not accept the credentials (401 Unauthorized"), "{text}");
        assert!(!text.contains("Status {"), "{text}");
        let forbidden = describe_status(403, "Forbidden", "microservices is forbidden: User \"x\" cannot list");
        assert!(forbidden.contains("User \"x\" cannot list"), "{forbidden}");
    }
}
