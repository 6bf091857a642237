//! TEST-ONLY component for the host's hardening tests. It goes after what the
//! host does and allocates on a tool's behalf: huge or many tool specs
//! (shaped by the `specs` dependency), host resources held at once, results
//! with many or long parts, and text meant to forge logs or drive a
//! terminal. Never ship it.

wit_bindgen::generate!({ path: "../../wit", world: "toolkit" });

use exports::wasm_agent::tool::tool::{Guest, ToolError, ToolOutput, ToolSpec};
use serde_json::{Value, json};
use wasm_agent::tool::host::{self, Level};
use wasm_agent::tool::types::{Annotations, Artifact, CallContext};

struct Hostile;

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: parameters.to_string(),
        annotations: Annotations::empty(),
    }
}

fn numbers(names: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), json!({"type": "integer", "minimum": 0})))
        .collect();
    json!({"type": "object", "properties": properties})
}

/// Extra tools as the `specs` dependency asks:
/// `{"count": N, "description": BYTES, "schema": BYTES, "pattern": RE, "ref": REF}`.
fn extra_specs() -> Vec<ToolSpec> {
    let Some(asked) = host::dependency("specs") else {
        return Vec::new();
    };
    let asked: Value = serde_json::from_str(&asked).unwrap_or_default();
    let number = |key: &str| asked[key].as_u64().unwrap_or(0) as usize;
    let description = "d".repeat(number("description").max(1));
    let mut text = json!({"type": "string"});
    if let Some(pattern) = asked["pattern"].as_str() {
        text["pattern"] = pattern.into();
    }
    let mut schema = json!({
        "type": "object",
        "description": "s".repeat(number("schema")),
        "properties": {"text": text},
    });
    if let Some(reference) = asked["ref"].as_str() {
        schema["$ref"] = reference.into();
    }
    (0..number("count"))
        .map(|i| spec(&format!("t{i}"), &description, schema.clone()))
        .collect()
}

impl Guest for Hostile {
    fn list_tools() -> Vec<ToolSpec> {
        let mut specs = vec![
            spec(
                "flood_fields",
                "Hold COUNT sets of HTTP headers of BYTES each.",
                numbers(&["count", "bytes"]),
            ),
            spec(
                "hold_files",
                "Open the file at PATH COUNT times and hold every descriptor.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "count": {"type": "integer"}}}),
            ),
            spec(
                "make_entries",
                "Create COUNT empty files and folders in the folder at PATH.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "count": {"type": "integer"}}}),
            ),
            spec(
                "many_artifacts",
                "Return COUNT artifacts with kind, MIME type and data of the sizes given.",
                numbers(&["count", "kind_bytes", "mime_bytes", "data_bytes"]),
            ),
            spec(
                "long_error",
                "Fail with a message of BYTES bytes.",
                numbers(&["bytes"]),
            ),
            spec(
                "redirect",
                "Move the folder at PATH aside (to PATH.moved) and put a symbolic link to TARGET in its place.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "target": {"type": "string"}}}),
            ),
            spec(
                "state_spin",
                "Read the same session-state key again and again, without end.",
                json!({"type": "object", "properties": {}}),
            ),
            spec(
                "forge",
                "Log TEXT, write it to stderr, and fail with it.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
        ];
        specs.extend(extra_specs());
        specs
    }

    fn call(name: String, arguments: String, _: CallContext) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let number = |key: &str| args[key].as_u64().unwrap_or(0) as usize;
        let text = |content: String| {
            Ok(ToolOutput {
                content,
                artifacts: Vec::new(),
            })
        };
        match name.as_str() {
            "flood_fields" => text(flood_fields(number("count"), number("bytes"))),
            "make_entries" => text(make_entries(
                args["path"].as_str().unwrap_or("/"),
                number("count"),
            )?),
            "hold_files" => text(hold_files(
                args["path"].as_str().unwrap_or("/"),
                number("count"),
            )?),
            "many_artifacts" => Ok(ToolOutput {
                content: String::new(),
                artifacts: (0..number("count"))
                    .map(|_| Artifact {
                        kind: "k".repeat(number("kind_bytes")),
                        mime_type: Some("m".repeat(number("mime_bytes"))),
                        data: vec![b'a'; number("data_bytes")],
                    })
                    .collect(),
            }),
            "long_error" => Err(ToolError::Failed("e".repeat(number("bytes")))),
            "redirect" => text(redirect(
                args["path"].as_str().unwrap_or("/"),
                args["target"].as_str().unwrap_or("/"),
            )?),
            "state_spin" => loop {
                let _ = host::get_state("k");
            },
            "forge" => {
                let forged = args["text"].as_str().unwrap_or_default();
                host::log(Level::Info, forged);
                eprintln!("{forged}");
                Err(ToolError::Failed(forged.to_string()))
            }
            other if other.starts_with('t') => text("ok".into()),
            other => Err(ToolError::UnknownTool(other.to_string())),
        }
    }
}

/// Creates header sets until `count` are held or the host refuses; each is
/// filled up to `bytes` or until the host refuses an append.
fn flood_fields(count: usize, bytes: usize) -> String {
    use wasip2::http::types::Fields;
    let value = vec![b'v'; 1024];
    let mut held = Vec::new();
    let mut total = 0usize;
    for i in 0..count {
        let fields = Fields::new();
        let mut filled = 0;
        while filled < bytes {
            if fields.append(&format!("x-{i}-{filled}"), &value).is_err() {
                break;
            }
            filled += value.len();
        }
        total += filled;
        held.push(fields);
    }
    format!("held {} header sets, {total} bytes", held.len())
}

/// Creates `count` empty files and folders under `path` (no data: inodes).
fn make_entries(path: &str, count: usize) -> Result<String, ToolError> {
    for i in 0..count {
        let made = if i % 2 == 0 {
            std::fs::File::create(format!("{path}/f{i}")).map(drop)
        } else {
            std::fs::create_dir(format!("{path}/d{i}"))
        };
        made.map_err(|e| ToolError::Failed(format!("made {i} entries, then: {e}")))?;
    }
    Ok(format!("made {count} entries"))
}

/// Moves the folder at `path` aside and links `path` to `target`: what a
/// tool with a read-write grant can do to a folder another grant names.
fn redirect(path: &str, target: &str) -> Result<String, ToolError> {
    let failed = |step: &str, e: std::io::Error| ToolError::Failed(format!("{step}: {e}"));
    std::fs::rename(path, format!("{path}.moved")).map_err(|e| failed("rename", e))?;
    #[allow(deprecated)] // `soft_link` is the one stable way to make a symlink on WASI.
    std::fs::soft_link(target, path).map_err(|e| failed("symlink", e))?;
    Ok(format!("{path} now links to {target}"))
}

/// Opens `path` `count` times, holding every descriptor until the end.
fn hold_files(path: &str, count: usize) -> Result<String, ToolError> {
    let mut held = Vec::new();
    for _ in 0..count {
        match std::fs::File::open(path) {
            Ok(file) => held.push(file),
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "opened {} descriptors, then: {e}",
                    held.len()
                )));
            }
        }
    }
    Ok(format!("held {} descriptors", held.len()))
}

export!(Hostile);
