//! OpenTelemetry for wasm-agent.
//!
//! - [`context`]: W3C trace context (`traceparent`, `tracestate`) taken
//!   from an incoming HTTP request or MCP `_meta` and made the parent of a
//!   span, and a span's own context for an outgoing request.
//! - `Telemetry` (feature `export`): the spans every crate opens with `tracing` (names and
//!   attributes after the OpenTelemetry semantic conventions) and the
//!   metrics given its `meter`, exported over
//!   OTLP/HTTP (protobuf) to `--otlp URL` or `OTEL_EXPORTER_OTLP_ENDPOINT`.
//!
//! Spans are `tracing` spans of targets under `wasm_agent`; without an
//! exporter they cost what a disabled `tracing` span costs.

#![warn(missing_docs)]

#[cfg(feature = "export")]
mod client;
pub mod context;
#[cfg(feature = "export")]
mod export;

#[cfg(feature = "export")]
pub use export::{Telemetry, TelemetryError};
pub use opentelemetry::metrics::Meter;
