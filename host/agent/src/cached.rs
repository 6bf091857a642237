//! The agent's use of its result cache: the key a call is filed under, and
//! tool outputs as the bytes a cache keeps. A cache that fails or holds
//! something unreadable is a miss: the call runs.

use std::time::Duration;

use serde_json::Value;
use wasm_agent_cache::{CacheError, CacheKey, CachedArtifact, CachedResult, ResultCache};
use wasm_agent_sandbox::result::Artifact;

use super::tool::{AgentTool, Runner, ToolOutput};

/// The version results of `tool` are filed under: its component's digest
/// (read at call time, so a reloaded component starts afresh), `host` for
/// a host tool, or what a remote tool says it is. `None` when the tool is
/// gone from its host.
pub(crate) fn version(tool: &AgentTool) -> Option<String> {
    match &tool.runner {
        Runner::Sandboxed { host, tool } => host.tool(tool).map(|info| info.digest),
        Runner::Host(..) => Some("host".into()),
        Runner::Remote(remote, _) => Some(format!("remote/{}", remote.version())),
    }
}

/// The key of a call of `tool` with `arguments` for `tenant`.
pub(crate) fn key(tool: &AgentTool, arguments: &Value, tenant: Option<&str>) -> Option<CacheKey> {
    Some(CacheKey::new(
        &tool.name,
        &version(tool)?,
        arguments,
        tenant,
    ))
}

/// The output cached under `key`, if any can be read.
pub(crate) async fn lookup(cache: &dyn ResultCache, key: &CacheKey) -> Option<ToolOutput> {
    match cache.get(key).await {
        Ok(found) => found.and_then(|bytes| decode(&bytes)),
        Err(error) => {
            tracing::debug!(target: "wasm_agent::agent", "cache read of {}: {error}", key.tool());
            None
        }
    }
}

/// Keeps `output` under `key` for `ttl`, unless the cache cannot.
pub(crate) async fn keep(
    cache: &dyn ResultCache,
    key: &CacheKey,
    output: &ToolOutput,
    ttl: Duration,
) {
    match cache.put(key, &encode(output), ttl).await {
        Ok(()) => {}
        Err(error @ CacheError::TooLarge { .. }) => {
            tracing::info!(target: "wasm_agent::agent", "result of {} not cached: {error}", key.tool());
        }
        Err(error) => {
            tracing::debug!(target: "wasm_agent::agent", "cache write of {}: {error}", key.tool());
        }
    }
}

fn encode(output: &ToolOutput) -> Vec<u8> {
    CachedResult {
        content: output.content.clone(),
        artifacts: output
            .artifacts
            .iter()
            .map(|artifact| CachedArtifact {
                kind: artifact.kind.clone(),
                mime_type: artifact.mime_type.clone(),
                data: artifact.data.clone(),
            })
            .collect(),
    }
    .encode()
}

fn decode(bytes: &[u8]) -> Option<ToolOutput> {
    let cached = CachedResult::decode(bytes)?;
    Some(ToolOutput {
        content: cached.content,
        artifacts: cached
            .artifacts
            .into_iter()
            .map(|artifact| Artifact {
                kind: artifact.kind,
                mime_type: artifact.mime_type,
                data: artifact.data,
            })
            .collect(),
    })
}
