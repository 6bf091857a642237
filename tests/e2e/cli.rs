//! The real `wasm-agent` binary: listing, calling, exit codes, config files
//! and clear errors for bad input.

use std::io::Write;
use std::process::Stdio;

use crate::common::{assert_clean_failure, component, run, stderr, stdout, temp_dir, wasm_agent};
use serde_json::Value;

fn path(name: &str) -> String {
    component(name).to_string_lossy().into_owned()
}

#[test]
fn tools_lists_names_descriptions_and_annotations() {
    let output = run(&["tools", &path("files")]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.starts_with("NAME"), "{table}");
    let write_line = table.lines().find(|l| l.starts_with("write_file")).unwrap();
    assert!(write_line.contains("destructive"), "{write_line}");
    let read_line = table.lines().find(|l| l.starts_with("read_file")).unwrap();
    assert!(read_line.contains("read-only"), "{read_line}");
}

#[test]
fn tools_json_prints_full_specs_for_a_folder() {
    let dir = temp_dir();
    for name in ["calculator", "json"] {
        std::fs::copy(component(name), dir.path().join(format!("{name}.wasm"))).unwrap();
    }
    let output = run(&["tools", "--json", &dir.path().to_string_lossy()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let specs: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = specs.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"calculate") && names.contains(&"json_query"),
        "{names:?}"
    );
    let calc = specs.iter().find(|s| s["name"] == "calculate").unwrap();
    assert_eq!(calc["parameters"]["type"], "object");
    assert!(calc["parameters"]["properties"]["expression"].is_object());
}

#[test]
fn call_prints_the_content() {
    let output = run(&[
        "call",
        &path("calculator"),
        "calculate",
        r#"{"expression":"2 * (3 + 4)"}"#,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "14");
}

#[test]
fn call_json_prints_exactly_one_object() {
    let output = run(&[
        "call",
        &path("calculator"),
        "calculate",
        r#"{"expression":"1+1"}"#,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["artifacts", "content", "duration_ms", "error", "tool"]
    );
    assert_eq!(value["tool"], "calculate");
    assert_eq!(value["content"], "2");
    assert!(value["error"].is_null());
    assert!(value["duration_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_failed_call_exits_1_with_the_kind() {
    let output = run(&[
        "call",
        &path("calculator"),
        "calculate",
        r#"{"expression":"1/0"}"#,
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["error"]["kind"], "failed");
    assert!(
        value["error"]["message"].as_str().unwrap().contains("zero"),
        "{value}"
    );

    let output = run(&["call", &path("calculator"), "calculate", r#"{"expr":"1"}"#]);
    assert_clean_failure(&output, 1, "invalid_arguments");
    let output = run(&["call", &path("calculator"), "nope"]);
    assert_clean_failure(&output, 1, "unknown_tool");
}

#[test]
fn hostile_calls_end_with_typed_errors_and_exit_1() {
    let fixture = path("fixture_tool");
    for (tool, args, kind) in [
        ("spin", "{}", "timeout"),
        ("alloc", "{}", "memory_limit"),
        ("recurse", "{}", "stack_overflow"),
        ("panic", r#"{"message":"oh no"}"#, "trap"),
    ] {
        let output = run(&[
            "call",
            &fixture,
            tool,
            args,
            "--json",
            "--timeout",
            "500ms",
            "--memory",
            "32MiB",
        ]);
        assert_eq!(output.status.code(), Some(1), "{tool}: {}", stderr(&output));
        let value: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(value["error"]["kind"], kind, "{tool}: {value}");
    }
    let output = run(&["call", &fixture, "spin", "--fuel", "50000000", "--json"]);
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["error"]["kind"], "out_of_fuel");
}

#[test]
fn tool_stdout_never_reaches_the_host_stdout() {
    let output = run(&[
        "call",
        &path("fixture_tool"),
        "stdout_flood",
        r#"{"bytes": 5000000}"#,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "flooded\n");
    assert!(
        stderr(&output).contains("dropped"),
        "the cap is reported: {}",
        stderr(&output)
    );
    assert!(
        output.stderr.len() < 200_000,
        "stderr holds the flood: {} bytes",
        output.stderr.len()
    );
}

#[test]
fn arguments_can_come_from_stdin() {
    let mut child = wasm_agent()
        .args(["call", &path("calculator"), "calculate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"expression":"sqrt(16)"}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "4");
}

#[test]
fn files_tool_works_inside_granted_dirs_only() {
    let dir = temp_dir();
    let grant = format!("{}:/work:rw", dir.path().display());
    let files = path("files");
    let write = run(&[
        "call",
        &files,
        "write_file",
        r#"{"path":"/work/notes.txt","content":"alpha\nbeta\n"}"#,
        "--allow-dir",
        &grant,
    ]);
    assert!(write.status.success(), "{}", stderr(&write));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let search = run(&[
        "call",
        &files,
        "search",
        r#"{"path":"/work","pattern":"bet"}"#,
        "--allow-dir",
        &grant,
    ]);
    assert!(stdout(&search).contains("notes.txt"), "{}", stdout(&search));
    let ro = format!("{}:/work:ro", dir.path().display());
    let denied = run(&[
        "call",
        &files,
        "write_file",
        r#"{"path":"/work/x.txt","content":"x"}"#,
        "--allow-dir",
        &ro,
    ]);
    assert_clean_failure(&denied, 1, "failed");
    assert!(!dir.path().join("x.txt").exists());
    let ungranted = run(&["call", &files, "read_file", r#"{"path":"/work/notes.txt"}"#]);
    assert_clean_failure(&ungranted, 1, "failed");
}

#[test]
fn json_tool_queries_documents() {
    let doc = r#"{"users":[{"name":"ada"},{"name":"alan"}]}"#;
    let args = serde_json::json!({"document": doc, "path": "users[1].name"}).to_string();
    let output = run(&["call", &path("json"), "json_query", &args]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("alan"), "{}", stdout(&output));
}

#[test]
fn env_and_dependency_flags_reach_the_tool() {
    let fixture = path("fixture_tool");
    let output = run(&["call", &fixture, "env", "--env", "MODE=test"]);
    assert_eq!(stdout(&output).trim(), "MODE=test");
    let output = run(&[
        "call",
        &fixture,
        "dependency",
        r#"{"name":"db"}"#,
        "--dependency",
        "db=sqlite://x",
    ]);
    assert_eq!(stdout(&output).trim(), "sqlite://x");
}

#[test]
fn config_aliases_and_policies_apply() {
    let dir = temp_dir();
    std::fs::copy(component("fixture_tool"), dir.path().join("fixture.wasm")).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/a.txt"), "from config").unwrap();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &config,
        r#"
[defaults]
timeout = "400ms"

[tools.probe]
component = "fixture.wasm"
dirs = ["data:/data:ro"]
env = { WHO = "config" }
prefix = "p_"
"#,
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    let read = run(&[
        "call",
        "probe",
        "p_read_path",
        r#"{"path":"/data/a.txt"}"#,
        "--config",
        &config,
    ]);
    assert_eq!(stdout(&read).trim(), "from config", "{}", stderr(&read));
    let env = run(&[
        "call",
        "probe",
        "p_env",
        "--config",
        &config,
        "--env",
        "EXTRA=flag",
    ]);
    assert_eq!(stdout(&env).trim(), "EXTRA=flag\nWHO=config");
    let spin = run(&["call", "probe", "p_spin", "--config", &config, "--json"]);
    let value: Value = serde_json::from_slice(&spin.stdout).unwrap();
    assert_eq!(value["error"]["kind"], "timeout");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("400ms"),
        "{value}"
    );
    let listed = run(&["tools", "--config", &config]);
    assert!(stdout(&listed).contains("p_echo"), "{}", stdout(&listed));
}

#[test]
fn config_errors_name_file_line_and_key() {
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    let cases = [
        (
            "[defaults]\ntimeout = \"1s\"\ntimout = \"2s\"\n",
            ":3:",
            "timout",
        ),
        ("[defaults]\nmemory = \"lots\"\n", ":2:", "defaults.memory"),
        (
            "[defaults]\ntimeout = \"soon\"\n",
            ":2:",
            "invalid duration",
        ),
        (
            "[tools.x]\ncomponent = \"missing.wasm\"\n",
            ":2:",
            "tools.x.component",
        ),
        ("[defaults\n", ":1:", "wasm-agent.toml"),
        ("[defaults]\nnetwork = [\"*\"]\n", ":2:", "*://*:*"),
        (
            "[defaults]\nnetwork = [\"https://x.com/path\"]\n",
            ":2:",
            "paths are not allowed",
        ),
    ];
    for (text, line, needle) in cases {
        std::fs::write(&config, text).unwrap();
        let output = run(&["tools", "--config", &config.to_string_lossy()]);
        assert_clean_failure(&output, 2, needle);
        assert_clean_failure(&output, 2, line);
    }
}

#[test]
fn bad_component_files_exit_2_with_a_clear_message() {
    let dir = temp_dir();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"this is not wasm").unwrap();
    assert_clean_failure(
        &run(&["tools", &garbage.to_string_lossy()]),
        2,
        "not a WebAssembly component",
    );
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, wat::parse_str("(module)").unwrap()).unwrap();
    assert_clean_failure(
        &run(&["tools", &core.to_string_lossy()]),
        2,
        "core WebAssembly module",
    );
    assert_clean_failure(
        &run(&["tools", "/no/such.wasm"]),
        2,
        "no such component file",
    );
    let empty = temp_dir();
    assert_clean_failure(
        &run(&["tools", &empty.path().to_string_lossy()]),
        2,
        "no .wasm files",
    );
}

#[test]
fn bad_flags_exit_2_with_what_was_wrong() {
    let calc = path("calculator");
    for (flag, value, needle) in [
        ("--memory", "lots", "invalid size"),
        ("--timeout", "soon", "duration"),
        ("--env", "NOEQUALS", "KEY=VALUE"),
        ("--allow-dir", "/definitely/missing", "/definitely/missing"),
        ("--memory", "8GiB", "memory"),
        ("--allow-host", "example.com", "scheme://host"),
        ("--allow-host", "*", "*://*:*"),
    ] {
        let output = run(&["call", &calc, "calculate", "{}", flag, value]);
        assert_clean_failure(&output, 2, needle);
    }
    let output = run(&["call", &calc, "calculate", "{}", "--metadata", "[1]"]);
    assert_clean_failure(&output, 2, "--metadata");
}

#[test]
fn falls_back_to_on_demand_allocation_when_the_pool_cannot_be_reserved() {
    // 16 GB of address space is too little for the instance pool, enough
    // for on-demand instances.
    let output = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 16000000 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_wasm-agent"))
        .args([
            "call",
            &path("calculator"),
            "calculate",
            r#"{"expression":"1+2"}"#,
        ])
        .env("WASM_AGENT_CACHE_DIR", crate::common::cache_dir())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "3");
    assert!(
        stderr(&output).contains("falling back to on-demand"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn compile_fills_the_cache_that_later_loads_use() {
    let cache = temp_dir();
    let compile = |args: &[&str]| {
        wasm_agent()
            .env("WASM_AGENT_CACHE_DIR", cache.path())
            .arg("compile")
            .args(args)
            .output()
            .expect("wasm-agent runs")
    };
    let (calculator, json) = (path("calculator"), path("json"));
    let first = compile(&[&calculator, &json]);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = stdout(&first);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.contains(": compiled in ")), "{text}");
    assert!(text.contains("tools: calculate"), "{text}");
    // Compiled once: the next load (any command, with this cache) finds it.
    let again = compile(&["--json", &calculator, &json]);
    assert!(again.status.success(), "{}", stderr(&again));
    for line in stdout(&again).lines() {
        let report: Value = serde_json::from_str(line).unwrap();
        assert_eq!(report["cache"], "hit", "{line}");
        assert!(report["tools"].as_array().is_some_and(|t| !t.is_empty()));
    }
    let listed = wasm_agent()
        .env("WASM_AGENT_CACHE_DIR", cache.path())
        .args(["tools", &calculator])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", stderr(&listed));
    // Nothing kept, or nothing named: said so, not attempted.
    assert_clean_failure(&compile(&["--no-cache", &calculator]), 2, "--no-cache");
    assert_clean_failure(&compile(&["missing.wasm"]), 2, "missing.wasm");
}
