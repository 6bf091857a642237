//! A `tools/call` result as the agent's [`ToolOutput`]: text for the model,
//! images, audio, blobs and structured content as artifacts; `isError`
//! results as the call's error.

use base64::Engine;
use rmcp::model::CallToolResult;
use serde_json::Value;
use wasm_agent_agent::ToolOutput;
use wasm_agent_sandbox::result::{Artifact, CallError, ErrorKind};

/// The most text and data one remote result may carry.
pub const MAX_RESULT_BYTES: usize = 4 << 20;

/// Converts `result` of `tool` from `server` (`MCP server "NAME"`).
pub(crate) fn convert(
    result: CallToolResult,
    server: &str,
    tool: &str,
) -> Result<ToolOutput, CallError> {
    let is_error = result.is_error == Some(true);
    // Walked as JSON: the wire's shape is the contract, whatever the
    // model types make of newer content kinds.
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    let mut texts: Vec<String> = Vec::new();
    let mut artifacts = Vec::new();
    let mut size = 0usize;
    for block in value["content"].as_array().into_iter().flatten() {
        let (text, artifact) = piece(block);
        size += text.len() + artifact.as_ref().map_or(0, |a| a.data.len());
        if size > MAX_RESULT_BYTES {
            return Err(too_large(server, tool));
        }
        texts.push(text);
        artifacts.extend(artifact);
    }
    if let Some(structured) = value.get("structuredContent").filter(|v| !v.is_null()) {
        let json = structured.to_string();
        if size + json.len() > MAX_RESULT_BYTES {
            return Err(too_large(server, tool));
        }
        if texts.is_empty() {
            texts.push(json.clone());
        }
        artifacts.push(Artifact {
            kind: "json".into(),
            mime_type: Some("application/json".into()),
            data: json.into_bytes(),
        });
    }
    let content = texts.join("\n");
    if is_error {
        let said = if content.trim().is_empty() {
            "no reason given".to_string()
        } else {
            content
        };
        return Err(CallError::new(ErrorKind::Failed, said));
    }
    Ok(ToolOutput { content, artifacts })
}

/// One content block: its text for the model, and what it carries besides.
fn piece(block: &Value) -> (String, Option<Artifact>) {
    let kind = block["type"].as_str().unwrap_or("unknown");
    match kind {
        "text" => (block["text"].as_str().unwrap_or_default().to_string(), None),
        "image" | "audio" => {
            let mime = block["mimeType"].as_str().map(str::to_string);
            let data = decode(&block["data"]);
            let text = format!(
                "[{kind} {}, {} bytes]",
                mime.as_deref().unwrap_or("of unknown type"),
                data.len()
            );
            let artifact = Artifact {
                kind: kind.to_string(),
                mime_type: mime,
                data,
            };
            (text, Some(artifact))
        }
        "resource" => {
            let resource = &block["resource"];
            if let Some(text) = resource["text"].as_str() {
                return (text.to_string(), None);
            }
            let uri = resource["uri"].as_str().unwrap_or_default();
            let data = decode(&resource["blob"]);
            let text = format!("[resource {uri}, {} bytes]", data.len());
            let artifact = Artifact {
                kind: "resource".into(),
                mime_type: resource["mimeType"].as_str().map(str::to_string),
                data,
            };
            (text, Some(artifact))
        }
        "resource_link" => {
            let name = block["name"].as_str().unwrap_or_default();
            let uri = block["uri"].as_str().unwrap_or_default();
            (format!("[resource {name}: {uri}]"), None)
        }
        other => (format!("[{other} content]"), None),
    }
}

fn decode(data: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data.as_str().unwrap_or_default())
        .unwrap_or_default()
}

fn too_large(server: &str, tool: &str) -> CallError {
    CallError::new(
        ErrorKind::OutputTooLarge,
        format!(
            "{server} answered {tool} with over {MAX_RESULT_BYTES} bytes, the limit for a remote result"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_images_and_structured_content_become_text_and_artifacts() {
        let output = convert(
            result(json!({
                "content": [
                    {"type": "text", "text": "two parts"},
                    {"type": "image", "mimeType": "image/png", "data": "iVBORw=="},
                    {"type": "resource_link", "name": "log", "uri": "file:///log"}
                ],
                "structuredContent": {"ok": true}
            })),
            "MCP server \"x\"",
            "t",
        )
        .unwrap();
        assert_eq!(
            output.content,
            "two parts\n[image image/png, 4 bytes]\n[resource log: file:///log]"
        );
        let kinds: Vec<_> = output.artifacts.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(kinds, ["image", "json"]);

        let only_structured = convert(
            result(json!({"content": [], "structuredContent": {"n": 1}})),
            "s",
            "t",
        )
        .unwrap();
        assert_eq!(only_structured.content, r#"{"n":1}"#);
    }

    #[test]
    fn error_results_fail_the_call_and_huge_ones_are_refused() {
        let error = convert(
            result(json!({"content": [{"type": "text", "text": "no such city"}], "isError": true})),
            "s",
            "weather",
        )
        .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Failed);
        assert_eq!(error.message, "no such city");

        // Counted once each: a large image then some text fits.
        let image =
            base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_RESULT_BYTES * 3 / 4]);
        let fits = convert(
            result(json!({"content": [
                {"type": "image", "mimeType": "image/png", "data": image},
                {"type": "text", "text": "a"}, {"type": "text", "text": "b"}
            ]})),
            "s",
            "t",
        );
        assert!(fits.is_ok(), "{:?}", fits.err());

        let huge = "x".repeat(MAX_RESULT_BYTES + 1);
        let error = convert(
            result(json!({"content": [{"type": "text", "text": huge}]})),
            "MCP server \"s\"",
            "t",
        )
        .unwrap_err();
        assert_eq!(error.kind, ErrorKind::OutputTooLarge);
        assert!(
            error
                .message
                .contains("MCP server \"s\" answered t with over"),
            "{}",
            error.message
        );
    }
}
