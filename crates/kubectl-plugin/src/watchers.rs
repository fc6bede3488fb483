//! Which namespaces the installed operators watch, read from their Deployments (the `run` flags and environment
//! variables of `microservice-operator`), so that a Microservice no operator will ever act on is explained instead
//! of waiting for ever.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// The label the bundle puts on the operator's Deployment.
pub const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=microservice-operator";
/// `microservice-operator run`'s default for `--namespace`.
const DEFAULT_NAMESPACE: &str = "todo";

/// What one installed operator watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watched {
    All,
    Namespace(String),
}

/// One operator Deployment and what it watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// `namespace/name` of the operator's Deployment.
    pub deployment: String,
    pub watched: Watched,
}

/// What a container running `microservice-operator run` watches: flags win over the environment, as clap reads them.
pub fn watched_by(container: &Container) -> Watched {
    let args = container.args.as_deref().unwrap_or_default();
    let env = |name: &str| {
        container.env.as_deref().unwrap_or_default().iter().find(|e| e.name == name).and_then(|e| e.value.clone())
    };
    let mut namespace = env("WATCH_NAMESPACE");
    let mut all = env("OPERATOR_ALL_NAMESPACES").is_some_and(|v| v == "true");
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--all-namespaces" => all = true,
            "--namespace" | "-n" => namespace = words.next().cloned(),
            other => {
                if let Some(value) = other.strip_prefix("--namespace=").or_else(|| other.strip_prefix("-n=")) {
                    namespace = Some(value.to_string());
                }
            }
        }
    }
    match namespace {
        // An empty namespace means all of them (see `microservice-operator run --help`).
        _ if all => Watched::All,
        Some(ns) if ns.trim().is_empty() => Watched::All,
        Some(ns) => Watched::Namespace(ns),
        None => Watched::Namespace(DEFAULT_NAMESPACE.to_string()),
    }
}

/// The operators installed in the cluster, or `None` when that cannot be known (no Deployment carries the bundle's
/// label, or the user may not list Deployments): the operator may also run outside the cluster.
pub async fn installed(client: &Client) -> Option<Vec<Installed>> {
    let list = Api::<Deployment>::all(client.clone()).list(&ListParams::default().labels(OPERATOR_SELECTOR)).await;
    let deployments = list.ok()?.items;
    let found: Vec<Installed> = deployments
        .iter()
        .filter_map(|d| {
            let container = d.spec.as_ref()?.template.spec.as_ref()?.containers.first()?;
            let deployment = format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any());
            Some(Installed { deployment, watched: watched_by(container) })
        })
        .collect();
    (!found.is_empty()).then_some(found)
}

/// The next step for a Microservice in `namespace` that no operator has acted on, when the installed operators say
/// why: none of them watches that namespace.
pub fn unwatched_step(namespace: &str, installed: &[Installed]) -> Option<String> {
    let watches = |i: &Installed| match &i.watched {
        Watched::All => true,
        Watched::Namespace(ns) => ns == namespace,
    };
    if installed.iter().any(watches) {
        return None;
    }
    let who: Vec<String> = installed
        .iter()
        .map(|i| match &i.watched {
            Watched::All => format!("{} watches every namespace", i.deployment),
            Watched::Namespace(ns) => format!("{} watches namespace {ns}", i.deployment),
        })
        .collect();
    Some(format!(
        "no operator watches namespace {namespace} ({}): create the Microservice in a watched namespace, or run the \
         operator with `--namespace {namespace}` (or `--all-namespaces`)",
        who.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::EnvVar;

    fn container(args: &[&str], env: &[(&str, &str)]) -> Container {
        Container {
            args: Some(args.iter().map(|a| a.to_string()).collect()),
            env: Some(
                env.iter()
                    .map(|(n, v)| EnvVar { name: n.to_string(), value: Some(v.to_string()), ..EnvVar::default() })
                    .collect(),
            ),
            ..Container::default()
        }
    }

    #[test]
    fn the_watched_namespace_comes_from_flags_then_environment_then_the_default() {
        let ns = |s: &str| Watched::Namespace(s.to_string());
        assert_eq!(watched_by(&container(&["run", "--namespace", "todo"], &[])), ns("todo"));
        assert_eq!(watched_by(&container(&["run", "--namespace=shop"], &[])), ns("shop"));
        assert_eq!(watched_by(&container(&["run", "-n", "shop"], &[("WATCH_NAMESPACE", "x")])), ns("shop"));
        assert_eq!(watched_by(&container(&["run"], &[("WATCH_NAMESPACE", "x")])), ns("x"));
        assert_eq!(watched_by(&container(&["run"], &[])), ns("todo"));
        assert_eq!(watched_by(&container(&["run", "--all-namespaces"], &[])), Watched::All);
        assert_eq!(watched_by(&container(&["run"], &[("OPERATOR_ALL_NAMESPACES", "true")])), Watched::All);
        assert_eq!(watched_by(&container(&["run", "--namespace", ""], &[])), Watched::All);
    }

    #[test]
    fn a_namespace_no_operator_watches_is_named_with_what_they_watch() {
        let todo = Installed {
            deployment: "microservice-operator/microservice-operator".into(),
            watched: Watched::Namespace("todo".into()),
        };
        let step = unwatched_step("shop", std::slice::from_ref(&todo)).unwrap();
        assert!(step.contains("no operator watches namespace shop"), "{step}");
        assert!(step.contains("microservice-operator/microservice-operator watches namespace todo"), "{step}");
        assert!(step.contains("--namespace shop"), "{step}");
        assert_eq!(unwatched_step("todo", std::slice::from_ref(&todo)), None);
        let all = Installed { deployment: "ops/op".into(), watched: Watched::All };
        assert_eq!(unwatched_step("shop", &[todo, all]), None);
    }
}
