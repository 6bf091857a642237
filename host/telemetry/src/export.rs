//! Exporting spans and metrics over OTLP/HTTP with protobuf bodies.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tokio::runtime::Handle;
use tracing::{Level, Metadata};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use super::client::ExportClient;

/// The instrumentation scope of every span and metric.
const SCOPE: &str = "wasm-agent";
/// Longest the exporters get to send what is left when the process ends.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why telemetry could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint or an `OTEL_*` variable is not usable.
    #[error("{what}: {why}")]
    Config {
        /// The flag or variable.
        what: String,
        /// What is wrong with it.
        why: String,
    },
    /// An exporter could not be built.
    #[error("cannot set up OTLP export: {0}")]
    Exporter(String),
    /// What was left could not be sent when the process ended.
    #[error("could not send the last spans and metrics: {0}")]
    Flush(String),
}

/// Spans and metrics exported over OTLP/HTTP until [`shutdown`](Self::shutdown).
#[derive(Debug)]
pub struct Telemetry {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

impl Telemetry {
    /// Starts exporting to `endpoint` (`--otlp`: the collector's base URL;
    /// `/v1/traces` and `/v1/metrics` are appended) or, without it, to what
    /// the standard `OTEL_EXPORTER_OTLP_*ENDPOINT` variables say. `None`
    /// when neither is set or `OTEL_SDK_DISABLED=true`. Exports run on
    /// `runtime`; `service_version` goes into the resource.
    pub fn start(
        endpoint: Option<&str>,
        runtime: Handle,
        service_version: &'static str,
    ) -> Result<Option<Self>, TelemetryError> {
        if env_is("OTEL_SDK_DISABLED", "true") {
            return Ok(None);
        }
        let configured = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        let base = match endpoint {
            Some(url) => Some(base_url(url)?),
            None if configured => None,
            None => return Ok(None),
        };
        check_protocol()?;
        let client =
            ExportClient::new(runtime).map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(SCOPE)
            .with_attribute(KeyValue::new("service.version", service_version))
            .build();

        let mut spans = SpanExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = &base {
            spans = spans.with_endpoint(format!("{base}/v1/traces"));
        }
        let spans = spans
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let tracer = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();

        let mut metrics = MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = &base {
            metrics = metrics.with_endpoint(format!("{base}/v1/metrics"));
        }
        let metrics = metrics
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let meter = SdkMeterProvider::builder()
            .with_periodic_exporter(metrics)
            .with_resource(resource)
            .build();
        Ok(Some(Self { tracer, meter }))
    }

    /// The `tracing` layer that turns wasm-agent's spans into OpenTelemetry
    /// spans (other crates' spans, and events below WARN, stay out).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.tracer(SCOPE))
            .with_location(false)
            .with_threads(false)
            .with_filter(filter_fn(exported))
    }

    /// The meter the host's metrics record into.
    pub fn meter(&self) -> Meter {
        self.meter.meter(SCOPE)
    }

    /// Sends what is left and stops exporting. It blocks (for at most a few
    /// seconds): call it from a blocking thread.
    pub fn shutdown(&self) -> Result<(), TelemetryError> {
        let spans = self.tracer.shutdown_with_timeout(SHUTDOWN_GRACE);
        let metrics = self.meter.shutdown_with_timeout(SHUTDOWN_GRACE);
        spans
            .and(metrics)
            .map_err(|e| TelemetryError::Flush(e.to_string()))
    }
}

/// wasm-agent's own spans, and its warnings as span events.
fn exported(metadata: &Metadata<'_>) -> bool {
    let ours = metadata.target().starts_with("wasm_agent");
    if metadata.is_span() {
        ours && *metadata.level() <= Level::INFO
    } else {
        ours && *metadata.level() <= Level::WARN
    }
}

/// `--otlp URL` checked and without a trailing slash.
fn base_url(url: &str) -> Result<String, TelemetryError> {
    let bad = |why: String| TelemetryError::Config {
        what: format!("--otlp {url:?}"),
        why,
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(format!("not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(
            "give an http:// or https:// URL of an OTLP/HTTP collector".into(),
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(
            "give the collector's base URL, without a query or fragment".into(),
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Only OTLP/HTTP with protobuf bodies is built in.
fn check_protocol() -> Result<(), TelemetryError> {
    for name in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ] {
        if let Ok(value) = std::env::var(name)
            && !value.is_empty()
            && value != "http/protobuf"
        {
            return Err(TelemetryError::Config {
                what: format!("{name}={value:?}"),
                why: "wasm-agent exports OTLP over http/protobuf only".into(),
            });
        }
    }
    Ok(())
}

fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_must_be_an_http_base_url() {
        assert_eq!(
            base_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318"
        );
        for bad in ["127.0.0.1:4318", "ftp://x", "http://x/?a=b", "not a url"] {
            let error = base_url(bad).unwrap_err().to_string();
            assert!(error.starts_with("--otlp"), "{error}");
        }
    }
}
