//! Errors from talking to the API server, in words a person can act on. kube's own Display gives
//! "ServiceError: client error (Connect)" (the cause is buried in the source chain) or a debug dump of the server's
//! Status; the operator's start-up checks and the plugin's `status`/`wait` print these instead.

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
