//! Every `console` example in the README and the book runs against the built
//! binary and components (`trycmd`), its output compared with the page's:
//! `...` on a line of its own stands for any lines, `[..]` for any text
//! within a line, `? failed` for a command that must fail. Examples with a
//! model talk to the scripted stand-in the pages tell readers to start
//! (`tests/scripted-model/scripted_model.py`), started here the same way.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::common::{cache_dir, root};

/// The port the pages' `run` examples find the scripted model on.
const SCRIPTED_MODEL_PORT: &str = "11435";

/// The pages with at least one `console` example.
fn pages_with_examples() -> Vec<PathBuf> {
    let mut pages = crate::docs_links::pages();
    pages.retain(|p| fs::read_to_string(p).unwrap().contains("```console"));
    pages
}

/// The scripted model, running until dropped.
struct ScriptedModel(Child);

impl ScriptedModel {
    /// Starts it as the pages do, and waits until it listens.
    fn start() -> Self {
        let mut child = Command::new("python3")
            .arg(root().join("tests/scripted-model/scripted_model.py"))
            .args(["--port", SCRIPTED_MODEL_PORT])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted model");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.starts_with("scripted model at"),
            "the scripted model did not start on port {SCRIPTED_MODEL_PORT}: {line:?}"
        );
        Self(child)
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_console_example_runs_as_shown() {
    let _model = ScriptedModel::start();
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
        .env("WASM_AGENT_CACHE_DIR", cache_dir().display().to_string())
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
