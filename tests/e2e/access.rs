//! `[access]` rules at the terminal: `run` offers the model only the tools
//! its `--user` and `--tenant` may call, a hidden tool the model names
//! anyway is unknown, a script's calls act for the same caller, and `call`
//! refuses a hidden tool as one that does not exist.

use serde_json::{Value, json};

use crate::code_mode_run::run_cli;
use crate::common::{component, stderr, stdout, temp_dir, wasm_agent};
use crate::polyglot::polyglot;
use crate::provider_server::{ProviderServer, openai};

/// A config of the calculator, the JSON tools and run_python (which may
/// call every tool), where tenant acme may call calculate and run_python.
fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("wasm-agent.toml");
    let text = format!(
        r#"
[tools.calculator]
component = "{}"
[tools.json]
component = "{}"
[tools.run_python]
component = "{}"
call_tools = ["*"]

[access]
default = "deny"

[[access.rules]]
name = "acme"
tenants = ["acme"]
tools = ["calculate", "run_python"]
effect = "allow"
"#,
        component("calculator").display(),
        component("json").display(),
        polyglot("run_python").display(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_offers_and_calls_only_what_its_caller_may() {
    let dir = temp_dir();
    let config = config(dir.path());
    let script = "for name in ['calculate', 'json_query']:\n    \
                  try:\n        print(name, tools[name](expression='6 * 7'))\n    \
                  except ToolCallError as error:\n        print(name, error.error_kind)";
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[
            ("call_1", "json_query", r#"{"document": "{}", "path": "a"}"#),
            (
                "call_2",
                "run_python",
                &json!({ "code": script }).to_string(),
            ),
        ]),
        openai::text("done"),
    ])
    .await;
    let args: Vec<String> = [
        "sum it",
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        &server.openai_url(),
        "--config",
        &config.display().to_string(),
        "--tenant",
        "acme",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let output = run_cli(args).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["tools_offered"], json!(["calculate", "run_python"]));
    let offered = server.requests()[0].body["tools"].as_array().unwrap().len();
    assert_eq!(offered, 2);
    // Named anyway: unknown, listing only the caller's tools.
    let hidden = &result["tool_calls"][0];
    assert_eq!(hidden["error"]["kind"], "unknown_tool", "{hidden}");
    assert_eq!(
        hidden["error"]["message"],
        "there is no tool named \"json_query\"; available tools: calculate, run_python"
    );
    // The script acts for the same caller.
    assert_eq!(
        result["tool_calls"][1]["content"], "stdout:\ncalculate 42\njson_query unknown_tool",
        "{result}"
    );
}

#[test]
fn call_refuses_a_hidden_tool_as_unknown_and_runs_an_allowed_one() {
    let dir = temp_dir();
    let config = config(dir.path());
    let call = |tenant: &str, tool: &str, arguments: &str| {
        let component = if tool == "calculate" {
            "calculator"
        } else {
            "json"
        };
        wasm_agent()
            .args(["call", "--config"])
            .arg(&config)
            .args(["--tenant", tenant, component, tool, arguments])
            .output()
            .unwrap()
    };
    let allowed = call("acme", "calculate", r#"{"expression": "6 * 7"}"#);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert_eq!(stdout(&allowed).trim(), "42");
    let other_tenant = call("globex", "calculate", r#"{"expression": "6 * 7"}"#);
    assert_ne!(other_tenant.status.code(), Some(0));
    assert!(
        stderr(&other_tenant)
            .contains("unknown_tool: there is no tool named \"calculate\"; no tools are available"),
        "{}",
        stderr(&other_tenant)
    );
    // `call` loads the one component: none of its tools is acme's.
    let hidden = call("acme", "json_query", r#"{"document": "{}", "path": "a"}"#);
    assert!(
        stderr(&hidden).contains(
            "unknown_tool: there is no tool named \"json_query\"; no tools are available"
        ),
        "{}",
        stderr(&hidden)
    );
}

#[test]
fn bad_rules_are_refused_naming_the_rule_and_the_file() {
    let dir = temp_dir();
    let path = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &path,
        "[access]\ndefault = \"deny\"\n[[access.rules]]\nname = \"r\"\ntools = []\neffect = \"allow\"\n",
    )
    .unwrap();
    let output = wasm_agent()
        .args(["access", "explain", "--config"])
        .arg(&path)
        .args(["--principal", "alice"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.contains("wasm-agent.toml: [access] rule 1 \"r\": `tools` is empty"),
        "{text}"
    );
    assert!(
        !text.contains("panicked") && !text.contains("backtrace"),
        "{text}"
    );
    std::fs::write(&path, "[access]\ndefault = \"maybe\"\n").unwrap();
    let output = wasm_agent()
        .args(["access", "explain", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let text = stderr(&output);
    assert!(
        text.contains("access.default") && text.contains("maybe"),
        "{text}"
    );
}
