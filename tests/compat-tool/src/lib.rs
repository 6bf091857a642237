//! A tool built against `wit/world.wit` as it was at `wasm-agent:tool@0.1.0`
//! (a frozen copy in this crate's `wit/`). Hosts of later 0.1.x versions must
//! keep loading and calling it unchanged: the compatibility test of the
//! contract.

wit_bindgen::generate!({ path: "wit", world: "toolkit" });

use exports::wasm_agent::tool::tool::{Guest, ToolError, ToolOutput, ToolSpec};
use wasm_agent::tool::host::{self, Level};
use wasm_agent::tool::types::{Annotations, CallContext};

struct Legacy;

impl Guest for Legacy {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "legacy_echo".into(),
            description: "Return the arguments (a tool built for contract 0.1.0).".into(),
            parameters: r#"{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}"#.into(),
            annotations: Annotations::READ_ONLY,
        }]
    }

    fn call(
        name: String,
        arguments: String,
        context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        if name != "legacy_echo" {
            return Err(ToolError::UnknownTool(name));
        }
        host::log(Level::Info, "legacy tool called");
        Ok(ToolOutput {
            content: format!("0.1.0 tool in session {}: {arguments}", context.session_id),
            artifacts: Vec::new(),
        })
    }
}

export!(Legacy);
