//! Embedding wasm-agent: load a tool component under a policy, subscribe to
//! events, and call it the way an agent loop would.
//!
//! ```sh
//! make setup
//! cargo run --release -p wasm-agent --example embed
//! ```

use std::time::Duration;

use wasm_agent::{ByteSize, CallContext, Policy, ToolEvent, ToolHost};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let component = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/wasm32-wasip2/release/calculator.wasm"
    );
    let host = ToolHost::builder().build()?;
    let policy = Policy::default()
        .timeout(Duration::from_secs(2))
        .memory(ByteSize::mib(32));
    let report = host.load(component, policy).await?;
    println!(
        "loaded {} ({:?}): {:?}",
        report.component, report.cache, report.tools
    );

    // What a model sees: name, description and the JSON Schema of the arguments.
    for tool in host.tools() {
        println!("{}: {}\n  {}", tool.name, tool.description, tool.parameters);
    }

    let mut events = host.subscribe();
    let context = CallContext::new().session("demo-session").user("ada");
    for arguments in [
        r#"{"expression": "2 * (3 + 4)"}"#,
        r#"{"expression": "ans / 7"}"#,
        r#"{"expression": "1 / 0"}"#,
        r#"{"expr": "oops"}"#,
    ] {
        let result = host.call("calculate", arguments, &context).await;
        // Errors are results: hand `model_text()` back to the model either way.
        println!(
            "{arguments} -> {} ({:?})",
            result.model_text(),
            result.duration
        );
    }
    while let Ok(event) = events.try_recv() {
        if let ToolEvent::Finished { tool, error, .. } = event {
            println!("event: {tool} finished, error: {error:?}");
        }
    }
    Ok(())
}
