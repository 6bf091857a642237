//! `wasm-agent new`: each language's project builds as it is and its example
//! tool can be called right away.

use std::path::Path;
use std::process::Command;

use crate::common::{assert_clean_failure, root, run, stdout, temp_dir, wasm_agent};

/// Creates a project of `lang` in `dir`.
fn scaffold(name: &str, lang: &str, dir: &Path) {
    let output = run(&["new", name, "--lang", lang, "--dir", &dir.to_string_lossy()]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("created"), "{output:?}");
}

/// Runs a build command and fails the test with its output if it fails.
fn build(command: &mut Command) {
    let output = command.output().expect("the build command runs");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Calls `tool` of `component` with the CLI and returns its output.
fn call(component: &Path, tool: &str, arguments: &str) -> String {
    let output = wasm_agent()
        .args(["call", &component.to_string_lossy(), tool, arguments])
        .output()
        .expect("wasm-agent runs");
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

/// A toolchain `make setup` installs, or a clear failure.
fn toolchain(relative: &str) -> std::path::PathBuf {
    let path = root().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run `make setup` (it installs the Python and JS toolchains)",
        path.display()
    );
    path
}

#[test]
fn a_rust_project_builds_and_its_tool_answers() {
    let dir = temp_dir();
    let project = dir.path().join("greeter");
    scaffold("greeter", "rust", &project);
    // Pinned to the workspace's dependency versions and built into its
    // target folder, the project reuses what `make setup` compiled.
    std::fs::copy(root().join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let target = root().join("target");
    build(
        Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", &target),
    );
    let component = target.join("wasm32-wasip2/release/greeter.wasm");
    let text = call(&component, "greet", r#"{"name": "Ada"}"#);
    assert!(text.contains("Hello, Ada!"), "{text}");
}

#[test]
fn a_python_project_builds_and_its_tool_answers() {
    let venv = toolchain("target/py-venv/bin");
    let dir = temp_dir();
    let project = dir.path().join("counter");
    scaffold("word-counter", "python", &project);
    let path = format!(
        "{}:{}",
        venv.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    build(Command::new(project.join("build.sh")).env("PATH", path));
    let text = call(
        &project.join("word_counter.wasm"),
        "word_stats",
        r#"{"text": "one two two"}"#,
    );
    assert!(text.contains("3 words"), "{text}");
    assert!(text.contains("two (2)"), "{text}");
}

#[test]
fn a_javascript_project_builds_and_its_tool_answers() {
    // The example tool's installed packages: the same pinned versions.
    let modules = toolchain("example-tools/mdtable/node_modules");
    let dir = temp_dir();
    let project = dir.path().join("slugs");
    scaffold("slugs", "js", &project);
    std::os::unix::fs::symlink(&modules, project.join("node_modules")).unwrap();
    build(
        Command::new("npm")
            .args(["run", "--silent", "build"])
            .current_dir(&project),
    );
    let text = call(
        &project.join("slugs.wasm"),
        "slugify",
        r#"{"text": "Hello, World!"}"#,
    );
    assert!(text.contains("hello-world"), "{text}");
}

#[test]
fn new_refuses_bad_names_and_occupied_folders() {
    let dir = temp_dir();
    let output = run(&[
        "new",
        "../evil",
        "--lang",
        "js",
        "--dir",
        &dir.path().join("x").to_string_lossy(),
    ]);
    assert_clean_failure(&output, 2, "cannot name a tool project");

    std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let output = run(&[
        "new",
        "tool",
        "--lang",
        "python",
        "--dir",
        &dir.path().to_string_lossy(),
    ]);
    assert_clean_failure(&output, 2, "not empty");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
        "mine"
    );

    let output = run(&[
        "new",
        "tool",
        "--lang",
        "rust",
        "--dir",
        &dir.path().join("r").to_string_lossy(),
        "--sdk",
        "/nonexistent",
    ]);
    assert_clean_failure(&output, 2, "--sdk");
    let output = run(&[
        "new",
        "tool",
        "--lang",
        "python",
        "--dir",
        &dir.path().join("p").to_string_lossy(),
        "--sdk",
        ".",
    ]);
    assert_clean_failure(&output, 2, "--lang rust only");
}
