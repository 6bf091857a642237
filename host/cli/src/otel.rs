//! OpenTelemetry for the process: `--otlp URL` (or the standard
//! `OTEL_EXPORTER_OTLP_*` variables) exports every span and, under
//! `serve`, the metrics; the logs on stderr stay as they are.

use std::sync::OnceLock;

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use wasm_agent::telemetry::{Meter, Telemetry};

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// Sets up the logs on stderr (at `verbose`, or as `RUST_LOG` says) and,
/// when an endpoint is configured, OTLP export on `runtime`.
pub fn init(
    verbose: u8,
    otlp: Option<&str>,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let telemetry = Telemetry::start(otlp, runtime.handle().clone(), env!("CARGO_PKG_VERSION"))?;
    // rmcp warns about every client mistake it answers (unknown tools, ...);
    // those are the client's to see, not the operator's.
    let default = match verbose {
        0 => "warn,rmcp=off",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(|| RedactedStderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(filter);
    let exported = telemetry.as_ref().map(Telemetry::layer);
    tracing_subscriber::registry()
        .with(logs)
        .with(exported)
        .init();
    if let Some(telemetry) = telemetry {
        let _ = TELEMETRY.set(telemetry);
    }
    Ok(())
}

/// Stderr for log lines, with every credential recognised by shape
/// redacted first: no line the host logs (a tool's, a server's, a
/// library's) shows a token, a key or a password in a URL.
struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(line);
        std::io::stderr().write_all(wasm_agent::redact::text(&text).as_bytes())?;
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The meter metrics go to, when exporting.
pub fn meter() -> Option<Meter> {
    TELEMETRY.get().map(Telemetry::meter)
}

/// Sends the spans and metrics not yet exported (blocking for at most a
/// few seconds); a failure is reported, not fatal.
pub fn finish(runtime: &tokio::runtime::Runtime) {
    let Some(telemetry) = TELEMETRY.get() else {
        return;
    };
    let flushed =
        runtime.block_on(async { tokio::task::spawn_blocking(|| telemetry.shutdown()).await });
    match flushed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("wasm-agent: {e}"),
        Err(e) => eprintln!("wasm-agent: could not send the last spans and metrics: {e}"),
    }
}
