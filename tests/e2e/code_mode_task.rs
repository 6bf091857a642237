//! The multi-step task code mode is measured on (by a test and by
//! `make bench`): total a week's orders with sales tax and lay them out as
//! a table, four dependent tool calls (`json_query`, `calculate` twice,
//! `markdown_table`) among every example tool.
//!
//! The scripted model reads each tool result and writes the next call from
//! it, as a model would: in normal mode one call per roundtrip, in code
//! mode one Python script. Each answer's usage counts tokens with the
//! o200k_base tokenizer: the request's messages and tool definitions as
//! sent (prompt), and the answer's own text or tool call (completion).

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use wasm_agent::agent::{Agent, AgentTool, CodeMode, RunOptions};
use wasm_agent::provider::{HttpProvider, ModelSpec};
use wasm_agent::{CallContext, LoadOptions, Policy, ToolHost};

use crate::provider_server::{ProviderServer, Reply, openai};

/// The orders the user pastes.
pub const ORDERS: &str = r#"{"orders": [{"id": "A-101", "item": "notebook", "qty": 3, "price": 12.5}, {"id": "A-102", "item": "pen set", "qty": 1, "price": 8.25}, {"id": "A-103", "item": "desk lamp", "qty": 2, "price": 24.99}, {"id": "A-104", "item": "stapler", "qty": 4, "price": 6.4}]}"#;

/// Tax applied to the subtotal.
const TAX: &str = "1.08";

/// Every example tool, the interpreters granted every tool.
pub async fn example_host(target: &Path, cache: &Path) -> ToolHost {
    let host = ToolHost::builder().cache_dir(cache).build().unwrap();
    let rust = target.join("wasm32-wasip2/release");
    let polyglot = target.join("polyglot");
    let mut load = Vec::new();
    for name in ["calculator", "json", "files", "fetch", "weather"] {
        load.push((rust.join(format!("{name}.wasm")), Policy::default(), name));
    }
    for name in ["textstats", "mdtable"] {
        load.push((
            polyglot.join(format!("{name}.wasm")),
            Policy::default(),
            name,
        ));
    }
    for name in ["run_python", "run_javascript"] {
        let policy = Policy::default().allow_call_tool("*");
        load.push((polyglot.join(format!("{name}.wasm")), policy, name));
    }
    let list: Vec<_> = load
        .into_iter()
        .map(|(path, policy, name)| {
            (
                wasm_agent::ComponentSource::from(path),
                LoadOptions::new(policy).name(name),
            )
        })
        .collect();
    host.load_all(list).await.unwrap();
    host
}

/// What one run of the task cost.
#[derive(Debug)]
pub struct Measured {
    /// Requests to the model.
    pub model_requests: usize,
    /// Tokens of every request's messages and tools.
    pub prompt_tokens: u64,
    /// Tokens of every answer.
    pub completion_tokens: u64,
    /// Tool calls the model made (in code mode, the one script).
    pub model_tool_calls: usize,
    /// The final answer.
    pub answer: String,
}

/// The user's request.
pub fn prompt() -> String {
    format!(
        "Here are this week's orders: {ORDERS}\nWhat do they come to with 8% sales tax? \
         Show the orders as a table too."
    )
}

/// Runs the task once on `host`'s tools (every example tool, the Python
/// interpreter granted `call_tools`), in code mode or not.
pub async fn measure(host: &ToolHost, code_mode: bool) -> Measured {
    let server = ProviderServer::with(move |request, index| {
        let reply = if code_mode {
            code_mode_model(&request.body, index)
        } else {
            step_by_step_model(&request.body, index)
        };
        with_usage(reply, &request.body)
    })
    .await;
    let spec: ModelSpec = "openai:gpt-4o-mini".parse().unwrap();
    let model =
        HttpProvider::with_key(&spec, Some(&server.openai_url()), Some("sk-test".into())).unwrap();
    let mut agent = Agent::builder("measured")
        .model(Arc::new(model))
        .tools(AgentTool::all_from(host));
    if code_mode {
        agent = agent.code_mode(CodeMode::cpython());
    }
    let agent = agent.build().unwrap();
    let output = agent
        .run(&prompt(), RunOptions::new().context(CallContext::new()))
        .await
        .unwrap();
    assert!(
        output.tool_calls.iter().all(|call| call.is_ok()),
        "{:#?}",
        output.tool_calls
    );
    Measured {
        model_requests: server.requests().len(),
        prompt_tokens: output.usage.prompt_tokens,
        completion_tokens: output.usage.completion_tokens,
        model_tool_calls: output.tool_calls.len(),
        answer: output.text,
    }
}

/// Normal mode: one call per answer, each written from the last result.
fn step_by_step_model(request: &Value, index: usize) -> Reply {
    let last = last_tool_result(request);
    let call = |name: &str, arguments: Value| {
        openai::tool_calls(&[(&format!("call_{index}"), name, &arguments.to_string())])
    };
    match index {
        0 => call("json_query", json!({"document": ORDERS, "path": "orders"})),
        1 => {
            let orders: Vec<Value> = serde_json::from_str(&last).expect("the orders");
            call("calculate", json!({"expression": sum_expression(&orders)}))
        }
        2 => call(
            "calculate",
            json!({"expression": format!("{} * {TAX}", last.trim())}),
        ),
        3 => {
            let orders: Value = serde_json::from_str::<Value>(ORDERS).unwrap()["orders"].clone();
            call("markdown_table", json!({"rows": orders}))
        }
        _ => {
            let results = tool_results(request);
            openai::text(&answer(&results[2], &results[3]))
        }
    }
}

/// Code mode: one script does the four steps; the answer comes from what it printed.
fn code_mode_model(request: &Value, index: usize) -> Reply {
    if index == 0 {
        let code = format!(
            "import json\n\
             orders = json.loads(tools.json_query(document={ORDERS:?}, path='orders'))\n\
             subtotal = tools.calculate(expression=' + '.join(f\"{{o['qty']}} * {{o['price']}}\" for o in orders))\n\
             total = tools.calculate(expression=f'{{subtotal}} * {TAX}')\n\
             print(total)\n\
             print(tools.markdown_table(rows=orders))"
        );
        return openai::tool_calls(&[("call_0", "run_code", &json!({ "code": code }).to_string())]);
    }
    let result = last_tool_result(request);
    let printed = result
        .strip_prefix("stdout:\n")
        .expect("what the script printed");
    let (total, table) = printed.split_once('\n').expect("total, then the table");
    openai::text(&answer(total, table))
}

fn answer(total: &str, table: &str) -> String {
    format!(
        "With 8% sales tax the orders come to ${}.\n\n{}",
        total.trim(),
        table.trim()
    )
}

/// `3 * 12.5 + 1 * 8.25 + ...` for the orders.
fn sum_expression(orders: &[Value]) -> String {
    orders
        .iter()
        .map(|o| format!("{} * {}", o["qty"], o["price"]))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The contents of the request's tool messages, in order.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn last_tool_result(request: &Value) -> String {
    tool_results(request).pop().unwrap_or_default()
}

/// `reply` with its usage counted: the request's messages and tools, and
/// the answer's message.
fn with_usage(reply: Reply, request: &Value) -> Reply {
    let Reply::Json(mut body) = reply else {
        return reply;
    };
    let prompt = tokens(&request["messages"].to_string()) + tokens(&request["tools"].to_string());
    let message = &body["choices"][0]["message"];
    let completion = match message["tool_calls"].as_array() {
        Some(calls) => calls
            .iter()
            .map(|c| tokens(&c["function"].to_string()))
            .sum(),
        None => tokens(message["content"].as_str().unwrap_or_default()),
    };
    body["usage"] = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    Reply::Json(body)
}

fn tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}
