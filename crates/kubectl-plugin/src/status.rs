//! `kubectl microservice status`: is each Microservice updating, ready, or in error, and what to do about it.

use std::path::PathBuf;
use std::process::ExitCode;

use kube::Client;
use kube::api::{Api, ListParams};
use microservice_operator::connection::{self, ConfigError, crd_missing};
use thiserror::Error;

use crate::view::{NOT_OBSERVED, ServiceView, render_json, render_table};
use crate::watchers;
use microservice_core::crd::Microservice;

/// How to reach the cluster, as kubectl does: in-cluster, or a kubeconfig (KUBECONFIG or ~/.kube/config).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Path to a kubeconfig file; default: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use; default: its current-context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("cannot read kubeconfig {path}: {source}; pass --kubeconfig PATH to a readable kubeconfig")]
    Read { path: String, source: ConfigError },
    #[error("cannot load the cluster configuration: {0}; set KUBECONFIG or pass --kubeconfig PATH (and --context)")]
    Config(ConfigError),
    #[error("cannot build a client for the cluster: {0}")]
    Client(kube::Error),
}

impl ClusterArgs {
    pub async fn client(&self) -> Result<Client, ConnectError> {
        let config = connection::load_config(self.kubeconfig.as_deref(), self.context.as_deref()).await.map_err(
            |e| match e {
                ConfigError::Read { ref path, .. } => ConnectError::Read { path: path.clone(), source: e },
                ConfigError::Custom { .. } | ConfigError::Default(_) => ConnectError::Config(e),
            },
        )?;
        Client::try_from(config).map_err(ConnectError::Client)
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
}

/// Show each Microservice's phase, generations, replicas and rolled-out image, and for anything not Ready why and
/// what to do next.
#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    /// One Microservice; all in the namespace when left out.
    pub name: Option<String>,
    /// Namespace; default: the kubeconfig context's namespace.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with_all = ["namespace", "name"])]
    pub all_namespaces: bool,
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Error)]
pub enum QueryError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("Microservice {namespace}/{name} not found; list them with `kubectl microservice status -n {namespace}`")]
    NotFound { namespace: String, name: String },
    #[error(
        "the Microservice resource is not installed in this cluster; install it with `microservice-operator crd | \
         kubectl apply -f -`"
    )]
    NoCrd,
    #[error("cannot read Microservices: {}", microservice_operator::connection::describe(.0))]
    Api(kube::Error),
    #[error("cannot render JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// A failed list or get of Microservices: a missing CRD, or the API's error.
pub fn api_error(err: kube::Error) -> QueryError {
    if crd_missing(&err) { QueryError::NoCrd } else { QueryError::Api(err) }
}

/// Which Microservices to show.
#[derive(Debug, Clone)]
pub enum Scope {
    All,
    Namespace(String),
    One { namespace: String, name: String },
}

/// Reads the Microservices in `scope`, sorted by namespace and name.
pub async fn query(client: &Client, scope: &Scope) -> Result<Vec<ServiceView>, QueryError> {
    let items = match scope {
        Scope::All | Scope::Namespace(_) => {
            let namespace = match scope {
                Scope::Namespace(ns) => Some(ns.as_str()),
                _ => None,
            };
            let api: Api<Microservice> = connection::scoped_api(client, namespace);
            api.list(&ListParams::default()).await.map_err(api_error)?.items
        }
        Scope::One { namespace, name } => {
            let api = Api::<Microservice>::namespaced(client.clone(), namespace);
            // get_opt maps any 404 to None; tell a missing CRD apart from a missing object.
            match api.get_opt(name).await.map_err(api_error)? {
                Some(ms) => vec![ms],
                None => {
                    api.list(&ListParams::default().limit(1)).await.map_err(api_error)?;
                    return Err(QueryError::NotFound { namespace: namespace.clone(), name: name.clone() });
                }
            }
        }
    };
    let mut views: Vec<ServiceView> = items.iter().map(ServiceView::of).collect();
    views.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    explain_unwatched(client, &mut views).await;
    Ok(views)
}

/// A Microservice no operator has acted on may sit in a namespace no installed operator watches: say so, and
/// which namespaces they watch, instead of "check that the operator is running".
async fn explain_unwatched(client: &Client, views: &mut [ServiceView]) {
    let waiting = |v: &ServiceView| v.reason.as_deref() == Some(NOT_OBSERVED);
    if !views.iter().any(waiting) {
        return;
    }
    let Some(installed) = watchers::installed(client).await else { return };
    for view in views.iter_mut().filter(|v| waiting(v)) {
        if let Some(step) = watchers::unwatched_step(&view.namespace, &installed) {
            view.next_step = Some(step);
        }
    }
}

pub async fn render(args: &StatusArgs) -> Result<String, QueryError> {
    let client = args.cluster.client().await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let scope = match (&args.name, args.all_namespaces) {
        (_, true) => Scope::All,
        (Some(name), false) => Scope::One { namespace, name: name.clone() },
        (None, false) => Scope::Namespace(namespace),
    };
    let views = query(&client, &scope).await?;
    match args.output {
        OutputFormat::Table => Ok(render_table(&views, args.all_namespaces)),
        OutputFormat::Json => Ok(render_json(&views)?),
    }
}

pub async fn run(args: StatusArgs) -> ExitCode {
    match render(&args).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
