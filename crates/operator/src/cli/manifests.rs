//! `microservice-operator manifests`: the install bundle of `deploy/` (the kustomize base) as one YAML stream, so
//! `microservice-operator manifests | kubectl apply -f -` installs the operator without a checkout.

use std::io::Write;
use std::process::ExitCode;

/// The files of `deploy/kustomization.yaml`'s `resources`, in its order, embedded at build time.
/// `tests/bundle.rs` keeps this list equal to the kustomization and the output equal to `kubectl kustomize deploy`.
pub const RESOURCES: &[(&str, &str)] = &[
    ("namespace.yaml", include_str!("../../../../deploy/namespace.yaml")),
    ("crd.yaml", include_str!("../../../../deploy/crd.yaml")),
    ("serviceaccount.yaml", include_str!("../../../../deploy/serviceaccount.yaml")),
    ("rbac.yaml", include_str!("../../../../deploy/rbac.yaml")),
    ("service.yaml", include_str!("../../../../deploy/service.yaml")),
    ("deployment.yaml", include_str!("../../../../deploy/deployment.yaml")),
    ("admission-policy.yaml", include_str!("../../../../deploy/admission-policy.yaml")),
];

/// Print the operator's install bundle (namespaces, CRD, ServiceAccount, RBAC, Deployment, metrics Service, the
/// contract's ValidatingAdmissionPolicy and its binding).
///
/// The same objects as `kubectl kustomize deploy`; install with `microservice-operator manifests | kubectl apply -f -`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ManifestsArgs {}

/// The bundle: every file of [`RESOURCES`] in order, as one multi-document YAML stream.
pub fn bundle_yaml() -> String {
    let mut out = String::new();
    for (i, (_, text)) in RESOURCES.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The bundle's objects, in order (documents holding only comments are skipped).
pub fn bundle_objects() -> Result<Vec<serde_json::Value>, serde_saphyr::Error> {
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&bundle_yaml())?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

pub async fn run(_args: ManifestsArgs) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bundle_yaml().as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): nothing more to say.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: cannot write the manifests to standard output: {e}");
            ExitCode::FAILURE
        }
    }
}
