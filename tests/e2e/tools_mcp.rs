//! `wasm-agent tools --mcp`: what other MCP servers offer, as wasm-agent's
//! own client sees it (a server written with the official Python SDK, and
//! `wasm-agent serve` itself), and bad `--mcp` input as clean errors.

use serde_json::Value;

use crate::common::{assert_clean_failure, component, run, stdout};
use crate::remote_mcp::{py_server, serve_fixture};

#[test]
fn lists_the_tools_of_each_server_with_their_annotations() {
    let (python, fixture) = (py_server(), serve_fixture(""));
    let output = run(&["tools", "--json", "--mcp", &python, "--mcp", &fixture]);
    assert!(output.status.success(), "{output:?}");
    let tools: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    let weather = tools
        .iter()
        .find(|t| t["name"] == "weather")
        .expect("weather listed");
    assert_eq!(weather["annotations"]["read_only"], true);
    assert_eq!(
        weather["parameters"]["properties"]["city"]["type"],
        "string"
    );
    assert!(weather["component"].as_str().unwrap().starts_with("mcp:"));
    let fixture_tools = tools
        .iter()
        .filter(|t| t["component"] != weather["component"]);
    let names: Vec<&str> = fixture_tools.map(|t| t["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"spin"),
        "the fixture's tools through serve: {names:?}"
    );

    let table = run(&["tools", "--mcp", &python]);
    let text = stdout(&table);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("weather ") && l.contains("read-only")),
        "{text}"
    );
}

#[test]
fn bad_mcp_input_is_a_clear_error() {
    let missing = run(&["tools", "--mcp", "no-such-command --flag"]);
    assert_clean_failure(&missing, 2, "cannot start `no-such-command --flag`");
    let calculator = component("calculator").display().to_string();
    let both = run(&["tools", &calculator, "--mcp", "x"]);
    assert_clean_failure(&both, 2, "cannot be used with");
    let bearer = run(&["tools", "--mcp", "x", "--mcp-bearer-env", "TOKEN"]);
    assert_clean_failure(&bearer, 2, "--mcp-bearer-env");
}
