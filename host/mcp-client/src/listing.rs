//! A server's tool list: read in bounded pages, each tool described as the
//! agent needs it (annotations with MCP's defaults, a version that changes
//! with its definition), too large ones left out.

use rmcp::model::PaginatedRequestParams;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use wasm_agent_sandbox::registry::Annotations;

use crate::McpClientError;
use crate::connection::Connection;
use crate::spec::ServerSpec;

/// At most this many tools are taken from one server.
pub const MAX_TOOLS: usize = 1000;
/// At most this many `tools/list` pages are read.
const MAX_PAGES: usize = 100;
/// A tool whose input schema is larger than this (as JSON) is left out.
const MAX_SCHEMA_BYTES: usize = 256 << 10;
/// Descriptions are cut to this many characters.
const MAX_DESCRIPTION_CHARS: usize = 4096;

/// All of one server's schemas and descriptions together, at most.
const MAX_LISTING_BYTES: usize = 8 << 20;

/// A tool as the server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteToolInfo {
    /// Its name on the server.
    pub name: String,
    /// What it does (cut to 4096 characters).
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
    /// Its hints, with MCP's defaults where the server gave none (a tool
    /// that does not say otherwise may destroy data and reach the world).
    pub annotations: Annotations,
    /// Changes with the server's version and the tool's definition.
    pub version: String,
}

/// Every page of `tools/list`, bounded.
pub(crate) async fn list(
    spec: &ServerSpec,
    connection: &Connection,
) -> Result<Vec<RemoteToolInfo>, McpClientError> {
    let failed = |reason: String| McpClientError::Connect {
        server: spec.label(),
        target: spec.transport.describe(),
        reason,
    };
    let mut tools = Vec::new();
    let (mut seen, mut bytes) = (0usize, 0usize);
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = connection
            .peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|error| failed(format!("tools/list failed: {error}")))?;
        for tool in page.tools {
            seen += 1;
            if seen > MAX_TOOLS {
                tracing::warn!(server = %spec.name, "more than {MAX_TOOLS} tools; the rest are left out");
                return Ok(tools);
            }
            let Some((info, schema_bytes)) = describe(spec, &connection.server, tool) else {
                continue;
            };
            bytes += schema_bytes + info.description.len();
            if bytes > MAX_LISTING_BYTES {
                tracing::warn!(server = %spec.name, "its tools' schemas and descriptions pass {MAX_LISTING_BYTES} bytes; the rest are left out");
                return Ok(tools);
            }
            tools.push(info);
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    tracing::warn!(server = %spec.name, "tools/list went on past {MAX_PAGES} pages; the rest are left out");
    Ok(tools)
}

/// Our view of one listed tool, and the size of its schema's text; `None`
/// (with a warning) for one too large.
fn describe(
    spec: &ServerSpec,
    server: &str,
    tool: rmcp::model::Tool,
) -> Option<(RemoteToolInfo, usize)> {
    let input_schema = Value::Object((*tool.input_schema).clone());
    let schema_text = input_schema.to_string();
    if schema_text.len() > MAX_SCHEMA_BYTES {
        tracing::warn!(server = %spec.name, tool = %tool.name, "left out: its input schema is over {MAX_SCHEMA_BYTES} bytes");
        return None;
    }
    let description: String = tool
        .description
        .as_deref()
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    let hints = tool.annotations.as_ref();
    let hint = |pick: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| hints.and_then(pick);
    let read_only = hint(|a| a.read_only_hint).unwrap_or(false);
    let annotations = Annotations {
        read_only,
        // MCP's defaults: a tool may destroy data unless it is read-only or
        // says it does not, and reaches the open world unless it says not.
        destructive: !read_only && hint(|a| a.destructive_hint).unwrap_or(true),
        idempotent: hint(|a| a.idempotent_hint).unwrap_or(false),
        open_world: hint(|a| a.open_world_hint).unwrap_or(true),
    };
    // The version covers the whole definition: a change of any part is
    // a new tool, whose approvals are asked again.
    let mut sha = Sha256::new();
    for part in [server, &tool.name, &description, &schema_text] {
        sha.update(part.as_bytes());
        sha.update([0]);
    }
    let Annotations {
        read_only,
        destructive,
        idempotent,
        open_world,
    } = annotations;
    sha.update([read_only, destructive, idempotent, open_world].map(u8::from));
    let info = RemoteToolInfo {
        name: tool.name.to_string(),
        description,
        input_schema,
        annotations,
        version: hex::encode(&sha.finalize()[..12]),
    };
    Some((info, schema_text.len()))
}
