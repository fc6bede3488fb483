//! Logs and traces: a `tracing` subscriber writing JSON or text lines to stderr under a RUST_LOG filter, and, when
//! OTEL_EXPORTER_OTLP_ENDPOINT is set, the same spans (every reconcile is one) exported over OTLP/gRPC.

use std::time::Duration;

use thiserror::Error;
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The OpenTelemetry service name of the operator's own spans.
pub const SERVICE_NAME: &str = "microservice-operator";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors).
    Json,
    /// Human-readable lines.
    Text,
}

#[derive(Debug, Error)]
pub enum TelemetryError {
    #[error("RUST_LOG is not a valid log filter ({0}); use e.g. RUST_LOG=info,microservice_operator=debug")]
    Filter(String),
    #[error("cannot set up OTLP span export to {endpoint}: {reason}")]
    Otlp { endpoint: String, reason: String },
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL={0} is not supported by this build; unset it or use grpc")]
    Protocol(String),
    #[error("a global logger is already installed: {0}")]
    Installed(String),
}

/// Keeps the span exporter alive; [`Telemetry::shutdown`] flushes what is still buffered.
#[must_use]
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// The filter is the innermost layer so it applies to every output (a filter inside a layer list would not).
type Filtered = Layered<EnvFilter, Registry>;
type BoxedLayer = Box<dyn Layer<Filtered> + Send + Sync>;

/// The filter when RUST_LOG is unset: `info`, without kube-client's own "failed with error" line per failed
/// request (the operator logs each failure once, with what it was doing; RUST_LOG brings the line back).
pub const DEFAULT_LOG_FILTER: &str = "info,kube_client::client::builder=off";

/// RUST_LOG, read once so a mistake in it is reported before anything runs. Defaults to [`DEFAULT_LOG_FILTER`].
pub fn log_filter() -> Result<EnvFilter, TelemetryError> {
    let from_env = std::env::var(EnvFilter::DEFAULT_ENV).ok().filter(|v| !v.trim().is_empty());
    EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::INFO.into())
        .parse(from_env.as_deref().unwrap_or(DEFAULT_LOG_FILTER))
        .map_err(|e| TelemetryError::Filter(e.to_string()))
}

/// Installs the global subscriber.
pub fn init(format: LogFormat, filter: EnvFilter) -> Result<Telemetry, TelemetryError> {
    let fmt: BoxedLayer = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
        // Colour only on a terminal: escape codes in a redirected file or a log collector are noise.
        LogFormat::Text => {
            use std::io::IsTerminal;
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(std::io::stderr)
                .boxed()
        }
    };
    let mut layers: Vec<BoxedLayer> = vec![fmt];
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|e| !e.trim().is_empty());
    let telemetry = match endpoint {
        Some(endpoint) => {
            let (layer, telemetry) = otlp(&endpoint)?;
            layers.push(layer);
            telemetry
        }
        None => Telemetry {
            #[cfg(feature = "otlp")]
            provider: None,
        },
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(layers)
        .try_init()
        .map_err(|e| TelemetryError::Installed(e.to_string()))?;
    Ok(telemetry)
}

#[cfg(feature = "otlp")]
fn otlp(endpoint: &str) -> Result<(BoxedLayer, Telemetry), TelemetryError> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{SpanExporter, WithExportConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !protocol.is_empty() && protocol != "grpc" {
        return Err(TelemetryError::Protocol(protocol));
    }
    // The tonic exporter connects lazily: a collector that is down loses spans, never the operator's start.
    let exporter = SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TelemetryError::Otlp { endpoint: endpoint.to_string(), reason: e.to_string() })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(SERVICE_NAME).build())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(SERVICE_NAME)).boxed();
    Ok((layer, Telemetry { provider: Some(provider) }))
}

#[cfg(not(feature = "otlp"))]
fn otlp(endpoint: &str) -> Result<(BoxedLayer, Telemetry), TelemetryError> {
    Err(TelemetryError::Otlp {
        endpoint: endpoint.to_string(),
        reason: "this build has no OTLP support (cargo feature `otlp`); unset OTEL_EXPORTER_OTLP_ENDPOINT".into(),
    })
}

impl Telemetry {
    /// Exports the spans still buffered, waiting at most `within`.
    pub async fn shutdown(self, within: Duration) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider {
            // The SDK's shutdown blocks until its export thread is done; that thread needs this runtime's IO.
            let flushed = tokio::task::spawn_blocking(move || provider.shutdown());
            match tokio::time::timeout(within, flushed).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::warn!(error = %e, "could not flush the last spans"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not flush the last spans"),
                Err(_) => tracing::warn!(seconds = within.as_secs(), "gave up flushing the last spans"),
            }
        }
        #[cfg(not(feature = "otlp"))]
        let _ = within;
    }
}
