//! Shared helpers of the end-to-end tests: built components, the real CLI
//! binary, and hosts configured for tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use wasm_agent::{LoadOptions, Policy, ToolHost};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A built guest component (`make setup` builds them all).
pub fn component(name: &str) -> PathBuf {
    let path = root()
        .join("target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `make setup` (or `make guests`) first",
        path.display()
    );
    path
}

/// The compile cache shared by the tests.
pub fn cache_dir() -> PathBuf {
    root().join("target/test-cache")
}

/// A host with the shared test cache.
pub fn host() -> ToolHost {
    ToolHost::builder()
        .cache_dir(cache_dir())
        .build()
        .expect("host builds")
}

/// A host with the fixture component loaded under `policy`.
pub async fn fixture_host(policy: Policy) -> ToolHost {
    let host = host();
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(policy).name("fixture"),
    )
    .await
    .expect("fixture loads");
    host
}

/// A short timeout for hostile calls.
pub const TIMEOUT: Duration = Duration::from_millis(500);

/// The `wasm-agent` binary, with the shared test cache.
pub fn wasm_agent() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasm-agent"));
    command
        .env("WASM_AGENT_CACHE_DIR", cache_dir())
        .env("WASM_AGENT_DATA_DIR", root().join("target/test-data"))
        .env_remove("WASM_AGENT_CONFIG")
        .env_remove("WASM_AGENT_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

/// Runs the CLI with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    wasm_agent().args(args).output().expect("wasm-agent runs")
}

/// Stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a failing run printed a clear message and no panic.
pub fn assert_clean_failure(output: &Output, code: i32, needle: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in stderr: {err}");
    assert!(!err.contains("panicked"), "panic in stderr: {err}");
    assert!(
        !err.contains("RUST_BACKTRACE"),
        "backtrace hint in stderr: {err}"
    );
}

/// A config in `dir` with the calculator as `calc`, its `calculate`
/// needing approval every time.
pub fn calculator_needing_approval(dir: &Path) -> PathBuf {
    let config = dir.join("wasm-agent.toml");
    let text = format!(
        "[tools.calc]\ncomponent = {:?}\n\n[calls.calculate]\nrequires_approval = \"always\"\n",
        component("calculator")
    );
    std::fs::write(&config, text).expect("config written");
    config
}

/// A fresh temporary folder.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Runs the shell `command` under a pseudo-terminal (`script`), as an
/// operator's shell would, typing `answer` and a newline; the terminal's
/// output (stdout and stderr interleaved) is the output's stdout.
pub async fn on_a_terminal(command: String, answer: &str) -> Output {
    let answer = format!("{answer}\n");
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env("OPENAI_API_KEY", "sk-test")
            .env("WASM_AGENT_CACHE_DIR", cache_dir())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, answer.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        output
    })
    .await
    .unwrap()
}
