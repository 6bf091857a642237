//! Every `console` example in the README and the book runs against the built
//! binary and components (`trycmd`), its output compared with the page's:
//! `...` on a line of its own stands for any lines, `[..]` for any text
//! within a line, `? failed` for a command that must fail. Examples with a
//! model talk to the scripted provider this test serves on the loopback
//! address the page names.

use std::fs;
use std::path::PathBuf;

use crate::common::root;
use crate::provider_server::{ProviderServer, Recorded, Reply, openai};

/// Where the pages' model examples find their (scripted) model.
const SCRIPTED_MODEL: &str = "127.0.0.1:11435";

/// The pages with at least one `console` example.
fn pages_with_examples() -> Vec<PathBuf> {
    let mut pages = crate::docs_links::pages();
    pages.retain(|p| fs::read_to_string(p).unwrap().contains("```console"));
    pages
}

/// The scripted model of the pages' `run` examples: asked with no tool
/// result yet, it calls `calculate` with `17 * 23` when offered it; given
/// the result, it answers with it.
fn scripted_model(request: &Recorded, _: usize) -> Reply {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let result = messages.iter().rev().find(|m| m["role"] == "tool");
    match result {
        Some(result) => {
            let value = result["content"].as_str().unwrap_or_default().trim();
            openai::text(&format!("17 × 23 = {value}."))
        }
        None => {
            let tools = request.body["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let has = |name: &str| tools.iter().any(|t| t["function"]["name"] == name);
            if has("calculate") {
                openai::tool_calls(&[("call_1", "calculate", r#"{"expression":"17 * 23"}"#)])
            } else {
                openai::text("I have no calculator.")
            }
        }
    }
}

#[test]
fn every_console_example_runs_as_shown() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _model = runtime.block_on(ProviderServer::on(SCRIPTED_MODEL, scripted_model));
    let work = tempfile::tempdir().unwrap();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_wasm-agent"));
    // As the README asks: the built binary first on the PATH (commands the
    // examples start, such as an MCP server, find it there).
    let path = std::env::join_paths(
        std::iter::once(binary.parent().unwrap().to_path_buf()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let cases = trycmd::TestCases::new();
    cases
        .register_bin("wasm-agent", binary.clone())
        .env("PATH", path.to_string_lossy().into_owned())
        .env(
            "WASM_AGENT_DATA_DIR",
            work.path().join("data").display().to_string(),
        )
        .timeout(std::time::Duration::from_secs(300));
    for page in pages_with_examples() {
        // trycmd runs a page's commands in the folder `PAGE.in` beside it:
        // a copy of the page whose `.in` is the repository's root.
        let name = page
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('/', "-");
        let copy = work.path().join(&name);
        fs::copy(&page, &copy).unwrap();
        std::os::unix::fs::symlink(root().canonicalize().unwrap(), copy.with_extension("in"))
            .unwrap();
        cases.case(copy);
    }
    cases.run();
}
