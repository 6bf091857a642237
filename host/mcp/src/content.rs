//! Our tools and results in MCP's terms.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ResourceContents, Tool, ToolAnnotations,
};
use serde_json::{Map, Value, json};

use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::{Artifact, ToolCallResult};

/// A tool's MCP description: name, a title made from the name, description,
/// input schema and the annotation hints from its WIT flags.
pub fn tool(info: &ToolInfo) -> Tool {
    // MCP wants an object schema with `"type": "object"` spelled out.
    let mut schema: JsonObject = match &info.parameters {
        Value::Object(object) => object.clone(),
        _ => Map::new(),
    };
    schema.entry("type").or_insert_with(|| json!("object"));
    let hints = info.annotations;
    let annotations = ToolAnnotations::with_title(title(&info.name))
        .read_only(hints.read_only)
        .destructive(hints.destructive)
        .idempotent(hints.idempotent)
        .open_world(hints.open_world);
    Tool::new(
        info.name.clone(),
        info.description.clone(),
        Arc::new(schema),
    )
    .with_title(title(&info.name))
    .with_annotations(annotations)
}

/// `read_file` → `Read file`.
fn title(name: &str) -> String {
    let words = name.replace(['_', '-'], " ");
    let mut chars = words.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => name.to_string(),
    }
}

/// A call's outcome as an MCP result. A failure becomes `isError: true` with
/// the one-line `kind: message` and `structuredContent.error`; a success
/// becomes its text, images and audio as their content types, JSON artifacts
/// as `structuredContent` and embedded resources, and other artifacts as
/// embedded resources.
pub fn call_result(result: &ToolCallResult) -> CallToolResult {
    if let Some(error) = &result.error {
        let mut output = CallToolResult::error(vec![ContentBlock::text(error.to_string())]);
        output.structured_content = Some(json!({
            "error": { "kind": error.kind, "message": error.message }
        }));
        return output;
    }
    let mut content = Vec::new();
    if !result.content.is_empty() || result.artifacts.is_empty() {
        content.push(ContentBlock::text(result.content.clone()));
    }
    let mut structured = Vec::new();
    for (index, artifact) in result.artifacts.iter().enumerate() {
        let uri = format!("artifact://{}/{}/{index}", result.tool, result.call_id);
        if let Some(value) = json_value(artifact) {
            structured.push((artifact.kind.as_str(), value));
        }
        content.push(artifact_block(artifact, uri));
    }
    let mut output = CallToolResult::success(content);
    output.structured_content = structured_content(structured);
    output
}

fn artifact_block(artifact: &Artifact, uri: String) -> ContentBlock {
    let mime = artifact
        .mime_type
        .as_deref()
        .unwrap_or("application/octet-stream");
    let base64 = || base64::engine::general_purpose::STANDARD.encode(&artifact.data);
    if mime.starts_with("image/") {
        return ContentBlock::image(base64(), mime);
    }
    if mime.starts_with("audio/") {
        return ContentBlock::audio(base64(), mime);
    }
    let textual = mime.starts_with("text/") || mime == "application/json";
    let resource = match std::str::from_utf8(&artifact.data) {
        Ok(text) if textual => ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(mime.to_string()),
            text: text.to_string(),
            meta: None,
        },
        _ => ResourceContents::blob(base64(), uri).with_mime_type(mime),
    };
    ContentBlock::resource(resource)
}

fn json_value(artifact: &Artifact) -> Option<Value> {
    (artifact.mime_type.as_deref() == Some("application/json"))
        .then(|| serde_json::from_slice(&artifact.data).ok())
        .flatten()
}

/// One JSON object artifact is the structured content as it is; several (or
/// one that is not an object) are keyed by artifact kind.
fn structured_content(values: Vec<(&str, Value)>) -> Option<Value> {
    match values.as_slice() {
        [] => None,
        [(_, Value::Object(_))] => values.into_iter().next().map(|(_, value)| value),
        _ => {
            let mut object = Map::new();
            for (kind, value) in values {
                let mut key = kind.to_string();
                let mut n = 1;
                while object.contains_key(&key) {
                    n += 1;
                    key = format!("{kind}_{n}");
                }
                object.insert(key, value);
            }
            Some(Value::Object(object))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use wasm_agent_sandbox::registry::Annotations;
    use wasm_agent_sandbox::result::{CallError, ErrorKind};

    fn result(content: &str, artifacts: Vec<Artifact>) -> ToolCallResult {
        ToolCallResult {
            tool: "t".into(),
            call_id: "call-1".into(),
            content: content.into(),
            artifacts,
            error: None,
            duration: Duration::ZERO,
        }
    }

    fn artifact(kind: &str, mime: &str, data: &[u8]) -> Artifact {
        Artifact {
            kind: kind.into(),
            mime_type: Some(mime.into()),
            data: data.to_vec(),
        }
    }

    #[test]
    fn annotations_and_title_come_from_the_spec() {
        let info = ToolInfo {
            name: "read_file".into(),
            component: "files".into(),
            digest: "sha256:00".into(),
            description: "Reads".into(),
            parameters: json!({"type": "object"}),
            annotations: Annotations {
                read_only: true,
                idempotent: true,
                ..Annotations::default()
            },
        };
        let value = serde_json::to_value(tool(&info)).unwrap();
        assert_eq!(value["title"], "Read file");
        assert_eq!(value["inputSchema"], json!({"type": "object"}));
        let hints = &value["annotations"];
        assert_eq!(hints["readOnlyHint"], true);
        assert_eq!(hints["destructiveHint"], false);
        assert_eq!(hints["idempotentHint"], true);
        assert_eq!(hints["openWorldHint"], false);
    }

    #[test]
    fn errors_are_flagged_with_their_kind() {
        let mut failed = result("", vec![]);
        failed.error = Some(CallError::new(ErrorKind::Timeout, "ran past 1s"));
        let value = serde_json::to_value(call_result(&failed)).unwrap();
        assert_eq!(value["isError"], true);
        assert_eq!(value["content"][0]["text"], "timeout: ran past 1s");
        assert_eq!(value["structuredContent"]["error"]["kind"], "timeout");
    }

    #[test]
    fn artifacts_become_matching_content() {
        let output = call_result(&result(
            "ok",
            vec![
                artifact("data", "application/json", br#"{"a":1}"#),
                artifact("plot", "image/png", b"\x89PNG"),
                artifact("log", "text/plain", b"line"),
                artifact("raw", "application/zip", b"PK"),
            ],
        ));
        let value = serde_json::to_value(&output).unwrap();
        assert_eq!(value["isError"], false);
        assert_eq!(value["structuredContent"], json!({"a": 1}));
        let content = value["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], "ok");
        assert_eq!(content[1]["type"], "resource");
        assert_eq!(content[1]["resource"]["text"], r#"{"a":1}"#);
        assert_eq!(content[2]["type"], "image");
        assert_eq!(content[2]["mimeType"], "image/png");
        assert_eq!(content[2]["data"], "iVBORw==");
        assert_eq!(content[3]["resource"]["text"], "line");
        assert_eq!(content[4]["resource"]["blob"], "UEs=");
        assert_eq!(content[4]["resource"]["mimeType"], "application/zip");
    }

    #[test]
    fn several_json_artifacts_are_keyed_by_kind() {
        let output = call_result(&result(
            "",
            vec![
                artifact("rows", "application/json", b"[1]"),
                artifact("rows", "application/json", b"[2]"),
            ],
        ));
        assert_eq!(
            output.structured_content,
            Some(json!({"rows": [1], "rows_2": [2]}))
        );
        assert_eq!(output.content.len(), 2, "no empty text block");
    }
}
