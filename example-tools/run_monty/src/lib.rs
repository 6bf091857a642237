//! `run_monty`: Python scripts on Monty (a Python interpreter written in
//! Rust), wasm-agent's code-mode interpreter. A script calls the tools its
//! policy grants as async functions; at each call it pauses: its whole
//! state leaves the instance (`script.start`/`script.resume` of the
//! contract's `interpreter` world), the host makes the calls, and the
//! script goes on in a fresh instance with their answers.

mod clock;
mod convert;
mod output;
mod segment;
mod state;

wit_bindgen::generate!({
    path: "../../wit",
    world: "interpreter",
    generate_all,
});

use exports::wasm_agent::tool::script::{self, Step, ToolResponse};
use exports::wasm_agent::tool::tool;
use wasm_agent::tool::types::{Annotations, CallContext, ToolError, ToolOutput, ToolSpec};

/// The one tool of the component.
pub(crate) const TOOL: &str = "run_monty";

struct Interpreter;

impl tool::Guest for Interpreter {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: TOOL.into(),
            description: DESCRIPTION.into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The Python script."}
                },
                "required": ["code"],
                "additionalProperties": false
            })
            .to_string(),
            annotations: Annotations::empty(),
        }]
    }

    /// A call made without the script interface runs the script with no
    /// tools to call.
    fn call(
        name: String,
        arguments: String,
        context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match <Interpreter as script::Guest>::start(name, arguments, Vec::new(), context)? {
            Step::Done(output) => Ok(output),
            Step::Paused(_) => Err(ToolError::Failed(
                "the script called a tool, but this host runs it without tools".into(),
            )),
        }
    }
}

impl script::Guest for Interpreter {
    fn start(
        name: String,
        arguments: String,
        tools: Vec<ToolSpec>,
        _context: CallContext,
    ) -> Result<Step, ToolError> {
        if name != TOOL {
            return Err(ToolError::UnknownTool(name));
        }
        let code = code_of(&arguments)?;
        segment::start(code, &tools)
    }

    fn resume(state: Vec<u8>, responses: Vec<ToolResponse>) -> Result<Step, ToolError> {
        segment::resume(&state, responses)
    }
}

fn code_of(arguments: &str) -> Result<String, ToolError> {
    let value: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| ToolError::InvalidArguments(format!("arguments are not JSON: {e}")))?;
    match value.get("code") {
        Some(serde_json::Value::String(code)) => Ok(code.clone()),
        _ => Err(ToolError::InvalidArguments(
            "`code` (a string) is required".into(),
        )),
    }
}

const DESCRIPTION: &str = "Run a Python script on Monty, a fast sandboxed Python subset \
(no classes with inheritance, generators, match or del; json, re, math, datetime and \
collections work). The result is what it printed and the value of its last expression.";

export!(Interpreter);
