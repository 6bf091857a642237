//! The agent's use of its result cache: the key a call is filed under, and
//! tool outputs as the bytes a cache keeps. A cache that fails or holds
//! something unreadable is a miss: the call runs.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasm_agent_cache::{CacheError, CacheKey, ResultCache};
use wasm_agent_sandbox::result::Artifact;

use super::tool::{AgentTool, Runner, ToolOutput};

/// The version results of `tool` are filed under: its component's digest
/// (read at call time, so a reloaded component starts afresh), or `host`
/// for a host tool. `None` when the tool is gone from its host.
pub(crate) fn version(tool: &AgentTool) -> Option<String> {
    match &tool.runner {
        Runner::Sandboxed { host, tool } => host.tool(tool).map(|info| info.digest),
        Runner::Host(..) => Some("host".into()),
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

#[derive(Serialize, Deserialize)]
struct Stored {
    content: String,
    artifacts: Vec<StoredArtifact>,
}

#[derive(Serialize, Deserialize)]
struct StoredArtifact {
    kind: String,
    mime_type: Option<String>,
    data_base64: String,
}

fn encode(output: &ToolOutput) -> Vec<u8> {
    let stored = Stored {
        content: output.content.clone(),
        artifacts: output
            .artifacts
            .iter()
            .map(|artifact| StoredArtifact {
                kind: artifact.kind.clone(),
                mime_type: artifact.mime_type.clone(),
                data_base64: base64::engine::general_purpose::STANDARD.encode(&artifact.data),
            })
            .collect(),
    };
    serde_json::to_vec(&stored).unwrap_or_default()
}

fn decode(bytes: &[u8]) -> Option<ToolOutput> {
    let stored: Stored = serde_json::from_slice(bytes).ok()?;
    let artifacts = stored
        .artifacts
        .into_iter()
        .map(|artifact| {
            Some(Artifact {
                kind: artifact.kind,
                mime_type: artifact.mime_type,
                data: base64::engine::general_purpose::STANDARD
                    .decode(artifact.data_base64)
                    .ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ToolOutput {
        content: stored.content,
        artifacts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_round_trip_and_garbage_is_a_miss() {
        let output = ToolOutput {
            content: "42 ✓".into(),
            artifacts: vec![Artifact {
                kind: "image".into(),
                mime_type: Some("image/png".into()),
                data: vec![0, 255, 7],
            }],
        };
        let back = decode(&encode(&output)).unwrap();
        assert_eq!(back.content, output.content);
        assert_eq!(back.artifacts, output.artifacts);
        assert!(decode(b"not json").is_none());
        assert!(
            decode(
                br#"{"content":"x","artifacts":[{"kind":"k","mime_type":null,"data_base64":"!"}]}"#
            )
            .is_none()
        );
    }
}
