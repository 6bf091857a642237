//! `{{name}}`: a wasm-agent tool. Each tool is a function from its argument
//! struct (the JSON Schema comes from the struct and its doc comments) to an
//! `Output`, or a `ToolError` the model can act on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_agent_guest::{Context, Output, Tool, ToolError, host};

/// Whom to greet.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GreetArgs {
    /// The name to greet.
    name: String,
}

/// Data for the application beside the text (the model never sees it).
#[derive(Serialize)]
struct Stats {
    greetings: u64,
}

fn greet(args: GreetArgs, ctx: &Context) -> Result<Output, ToolError> {
    if args.name.trim().is_empty() {
        return Err(ToolError::invalid_arguments("name must not be empty"));
    }
    // Session state: JSON values the host keeps per session.
    let greetings = host::state::get::<u64>("greetings")?.unwrap_or(0) + 1;
    host::state::set("greetings", &greetings)?;
    host::info(&format!("greeting #{greetings} in session {}", ctx.session_id));
    Output::text(format!("Hello, {}! (greeting #{greetings})", args.name))
        .with_json("stats", &Stats { greetings })
}

wasm_agent_guest::export_tools![
    Tool::new(
        "greet",
        "Greet someone by name and count the greetings in this session.",
        greet
    )
];
