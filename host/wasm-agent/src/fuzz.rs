//! Entry points for the fuzz targets in `fuzz/` (not a stable API): each
//! takes untrusted or operator bytes the way the host does, and must return
//! (an error is fine) without panicking, hanging or growing without bound.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::policy::{ByteSize, ConfigFile, DirGrant, HeaderTarget, NetworkGrant, PolicyLayer};

/// Grant, size, duration and header-pattern parsing, and a policy layer as
/// TOML, then validation of the policy it makes.
pub fn policy_text(text: &str) {
    let _ = text.parse::<NetworkGrant>();
    let _ = text.parse::<ByteSize>();
    let _ = text.parse::<DirGrant>();
    let _ = HeaderTarget::parse(text);
    let _ = crate::policy::duration_text::parse(text);
    if let Ok(layer) = toml::from_str::<PolicyLayer>(text) {
        let _ = layer.apply_to(crate::Policy::default()).validate();
    }
}

/// A whole config file, its `[agent]` section included.
pub fn config(text: &str) {
    if let Ok(file) = ConfigFile::parse(text, Path::new("/nonexistent/wasm-agent/wasm-agent.toml"))
    {
        let _ = crate::agent::config::AgentConfig::from_file(&file);
    }
}

/// A tool's schema (as a component lists it) and arguments checked against
/// it, as at load and before every call.
pub fn arguments(schema: &str, arguments: &str) {
    let Ok(schema) = serde_json::from_str::<Value>(schema) else {
        return;
    };
    let Ok(validator) = crate::specs::compile_schema(&schema) else {
        return;
    };
    if let Ok(value) = serde_json::from_str::<Value>(arguments) {
        let _ = crate::specs::check_value(&validator, "fuzz", &value);
    }
}

pub use crate::agent::fuzz::provider_answer;

/// A cosign simple-signing payload, checked as a verified one is (type,
/// manifest digest, repository named).
pub fn signed_payload(bytes: &[u8]) {
    crate::oci::fuzz_payload(bytes);
}

/// Audit records as `audit verify` reads them: lines of a table's rows, and
/// the same bytes as a log file (torn last line and all).
pub fn audit_records(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = crate::audit::verify_records(
        "fuzz",
        text.lines().map(str::to_string),
        None,
        &crate::audit::Expect {
            partial: true,
            head: None,
        },
    );
    static LOG: OnceLock<std::path::PathBuf> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("wasm-agent-fuzz-audit-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir.join("audit.jsonl")
    });
    if std::fs::write(log, bytes).is_ok() {
        let _ = crate::audit::verify(
            log,
            &crate::audit::Expect {
                partial: true,
                head: None,
            },
        );
    }
}

/// JSON-RPC lines sent to the MCP server's own loop over an in-memory
/// stream, after a valid handshake (or, when the input starts with `!`,
/// with none: the loop then hands the connection to rmcp's service); waits
/// for the server to go quiet (at most 2 s).
pub fn mcp_messages(input: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    static RUNTIME: OnceLock<Option<(tokio::runtime::Runtime, crate::ToolHost)>> = OnceLock::new();
    let Some((runtime, host)) = RUNTIME.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .ok()?;
        let host =
            runtime.block_on(async { crate::ToolHost::builder().no_cache().build().ok() })?;
        Some((runtime, host))
    }) else {
        return;
    };
    let server = crate::mcp::McpServer::builder(host.clone()).build();
    let (handshake, input) = match input.strip_prefix(b"!") {
        Some(rest) => (false, rest),
        None => (true, input),
    };
    runtime.block_on(async move {
        let (client, transport) = tokio::io::duplex(1 << 16);
        let (server_reader, server_writer) = tokio::io::split(transport);
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(server.serve_lines(server_reader, server_writer, stop));
        let (mut reader, mut writer) = tokio::io::split(client);
        let opening = concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        );
        let input = input.to_vec();
        let writing = tokio::spawn(async move {
            if handshake {
                let _ = writer.write_all(opening.as_bytes()).await;
            }
            let _ = writer.write_all(&input).await;
            let _ = writer.write_all(b"\n").await;
            let _ = writer.shutdown().await;
        });
        let mut sink = vec![0u8; 1 << 16];
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
        writing.abort();
        serving.abort();
    });
}
