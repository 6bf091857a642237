//! TEST-ONLY component: one trivial tool, the baseline of `make bench`.

use schemars::JsonSchema;
use serde::Deserialize;
use wasm_agent_guest::{Context, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// Text to return unchanged.
    text: String,
}

fn echo(args: EchoArgs, _: &Context) -> Result<String, ToolError> {
    Ok(args.text)
}

wasm_agent_guest::export_tools![
    Tool::new("echo", "Return the text unchanged.", echo)
        .read_only()
        .idempotent()
];
