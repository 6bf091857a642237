//! `run_python` and `run_javascript`: code a model wrote, run in the sandbox.
//! Its output, value and errors come back as the model needs them, and
//! hostile code is contained with the exact error kind, the host intact and
//! the next call clean.

use std::time::Duration;

use serde_json::json;
use wasm_agent::{
    ByteSize, CallContext, DirMode, ErrorKind, LoadOptions, Policy, ToolCallResult, ToolHost,
};

use crate::common::{TIMEOUT, host, temp_dir};
use crate::polyglot::polyglot;

/// The two interpreters as (component, tool).
const PYTHON: (&str, &str) = ("run_python", "run_python");
const JAVASCRIPT: (&str, &str) = ("run_javascript", "run_javascript");

async fn interpreter((component, _): (&str, &str), policy: Policy) -> ToolHost {
    let host = host();
    host.load_with(
        polyglot(component),
        LoadOptions::new(policy).name(component),
    )
    .await
    .unwrap_or_else(|e| panic!("{component} loads: {e}"));
    host
}

async fn run(host: &ToolHost, (_, tool): (&str, &str), code: &str) -> ToolCallResult {
    host.call(
        tool,
        &json!({ "code": code }).to_string(),
        &CallContext::new().session("s"),
    )
    .await
}

/// A 64 MiB cap and the given time limit.
fn hostile_policy(timeout: Duration) -> Policy {
    Policy::default().timeout(timeout).memory(ByteSize::mib(64))
}

/// The time limit for cases that must end some other way than by timing out:
/// long enough that a loaded CI machine never turns them into timeouts.
const PATIENT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn output_and_the_last_value_come_back() {
    let python = interpreter(PYTHON, Policy::default()).await;
    let result = run(
        &python,
        PYTHON,
        "import math\nprint('r =', 2)\nmath.pi * 2 ** 2",
    )
    .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        result.content,
        "stdout:\nr = 2\n\nvalue:\n12.566370614359172"
    );
    let quiet = run(&python, PYTHON, "x = 1").await;
    assert_eq!(quiet.content, "(no output)");
    let read = python
        .call(
            "run_python",
            &json!({"code": "import sys\nsys.stdin.read().upper()", "stdin": "piped"}).to_string(),
            &CallContext::new(),
        )
        .await;
    assert_eq!(read.content, "value:\n'PIPED'", "{read:?}");

    let js = interpreter(JAVASCRIPT, Policy::default()).await;
    let result = run(
        &js,
        JAVASCRIPT,
        "console.log('r =', 2); console.warn('careful');\n[1, 2].map(x => x * 3)",
    )
    .await;
    assert_eq!(
        result.content, "stdout:\nr = 2\n\nstderr:\ncareful\n\nvalue:\n[3, 6]",
        "{result:?}"
    );
    let awaited = run(
        &js,
        JAVASCRIPT,
        "const v = await Promise.resolve(21);\nreturn v * 2",
    )
    .await;
    assert_eq!(awaited.content, "value:\n42", "{awaited:?}");
    let read = js
        .call(
            "run_javascript",
            &json!({"code": "stdin.toUpperCase()", "stdin": "piped"}).to_string(),
            &CallContext::new(),
        )
        .await;
    assert_eq!(read.content, "value:\n\"PIPED\"", "{read:?}");
}

#[tokio::test]
async fn errors_carry_what_the_model_needs_to_fix_its_code() {
    let python = interpreter(PYTHON, Policy::default()).await;
    let raised = run(
        &python,
        PYTHON,
        "print('before')\nrows = {}\nrows['missing']",
    )
    .await;
    let error = raised.error.expect("a KeyError fails the call");
    assert_eq!(error.kind, ErrorKind::Failed);
    for needle in [
        "stdout:\nbefore",
        "line 3",
        "rows['missing']",
        "KeyError: 'missing'",
    ] {
        assert!(
            error.message.contains(needle),
            "{needle:?} in {}",
            error.message
        );
    }
    assert!(
        !error.message.contains("app.py"),
        "no frames of the tool itself: {}",
        error.message
    );
    let syntax = run(&python, PYTHON, "def f(:\n  pass").await;
    let error = syntax.error.expect("a syntax error fails the call");
    assert_eq!(error.kind, ErrorKind::Failed);
    assert!(error.message.contains("SyntaxError"), "{}", error.message);
    assert!(error.message.contains("line 1"), "{}", error.message);

    let js = interpreter(JAVASCRIPT, Policy::default()).await;
    let thrown = run(&js, JAVASCRIPT, "let a = 1;\nnull.field").await;
    let error = thrown.error.expect("a TypeError fails the call");
    assert_eq!(error.kind, ErrorKind::Failed);
    assert!(error.message.starts_with("TypeError"), "{}", error.message);
    assert!(error.message.contains("line 2"), "{}", error.message);
    let syntax = run(&js, JAVASCRIPT, "let x = (;").await;
    let error = syntax.error.expect("a syntax error fails the call");
    assert!(
        error.message.starts_with("SyntaxError"),
        "{}",
        error.message
    );
    let deep = run(&js, JAVASCRIPT, "function f(n) { return f(n + 1) }\nf(0)").await;
    let error = deep.error.expect("endless recursion fails the call");
    assert_eq!(error.kind, ErrorKind::Failed);
    assert!(
        error.message.contains("too much recursion"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("repeated"),
        "repeated frames are folded: {}",
        error.message
    );
    assert!(error.message.len() < 2000, "{}", error.message);
}

/// Hostile code, what it must end as, and a word of the message.
type Case = (&'static str, Option<ErrorKind>, &'static str);

const PYTHON_CASES: &[Case] = &[
    ("while True: pass", Some(ErrorKind::Timeout), "time limit"),
    (
        "fetch('http://127.0.0.1:9/')",
        Some(ErrorKind::CapabilityDenied),
        "--allow-host http://127.0.0.1:9",
    ),
    (
        "x = bytearray(200 * 2**20)",
        Some(ErrorKind::MemoryLimit),
        "64MiB",
    ),
    (
        "chunks = []\nwhile True: chunks.append('x' * 2**20)",
        Some(ErrorKind::MemoryLimit),
        "memory",
    ),
    (
        "def f(n): return f(n + 1)\nf(0)",
        Some(ErrorKind::Failed),
        "RecursionError",
    ),
    (
        "l = []\nfor _ in range(200000): l = [l]\nstr(l)",
        Some(ErrorKind::StackOverflow),
        "stack",
    ),
    ("print('x' * 10**6)", None, "more characters cut"),
    (
        "open('/etc/passwd').read()",
        Some(ErrorKind::Failed),
        "FileNotFoundError",
    ),
    (
        "open('/proc/self/status').read()",
        Some(ErrorKind::Failed),
        "FileNotFoundError",
    ),
    (
        "import os\nos.listdir('/')",
        Some(ErrorKind::Failed),
        "FileNotFoundError",
    ),
    ("open('x.txt', 'w')", Some(ErrorKind::Failed), "Error"),
    (
        "import socket",
        Some(ErrorKind::Failed),
        "No module named 'socket'",
    ),
    // What models reach for: the sandbox's own, refused where not granted.
    (
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')",
        Some(ErrorKind::CapabilityDenied),
        "--allow-host http://127.0.0.1:9",
    ),
    (
        "import requests\nrequests.post('http://127.0.0.1:9/', json={})",
        Some(ErrorKind::CapabilityDenied),
        "--allow-host http://127.0.0.1:9",
    ),
    (
        "import subprocess",
        Some(ErrorKind::Failed),
        "No module named 'subprocess'",
    ),
    (
        "import os\nos.fork()",
        Some(ErrorKind::Failed),
        "no attribute 'fork'",
    ),
    (
        "import os\nos.system('id')",
        Some(ErrorKind::Failed),
        "no attribute 'system'",
    ),
    (
        "import ctypes",
        Some(ErrorKind::Failed),
        "No module named 'ctypes'",
    ),
    (
        "import threading",
        Some(ErrorKind::Failed),
        "No module named 'threading'",
    ),
    (
        "import numpy",
        Some(ErrorKind::Failed),
        "No module named 'numpy'",
    ),
    ("import os\nos.environ", None, "environ({})"),
    (
        "eval('__import__(\"sys\").version_info >= (3, 0)')",
        None,
        "True",
    ),
];

const JAVASCRIPT_CASES: &[Case] = &[
    ("while (true) {}", Some(ErrorKind::Timeout), "time limit"),
    (
        "const a = []; while (true) a.push(new Uint8Array(1 << 24))",
        Some(ErrorKind::MemoryLimit),
        "64MiB",
    ),
    (
        "let s = 'x'; while (true) s += s",
        Some(ErrorKind::Failed),
        "allocation size overflow",
    ),
    (
        "for (let i = 0; i < 1e4; i++) console.log('line ' + i)",
        None,
        "more characters cut",
    ),
    (
        "await fetch('http://127.0.0.1:9/')",
        Some(ErrorKind::CapabilityDenied),
        "--allow-host http://127.0.0.1:9",
    ),
    ("import('fs')", Some(ErrorKind::Failed), "no modules"),
    (
        "require('child_process')",
        Some(ErrorKind::Failed),
        "Cannot find module 'child_process'",
    ),
    ("process.env", None, "{}"),
    ("typeof WebAssembly", None, "\"undefined\""),
    ("eval('6 * 7')", None, "42"),
    ("new Function('return 6 * 7')()", None, "42"),
    // A promise nothing can settle: the engine ends its event loop and aborts.
    (
        "await new Promise(() => {})",
        Some(ErrorKind::Trap),
        "event loop",
    ),
];

#[tokio::test]
async fn hostile_code_is_contained_with_its_kind_and_the_next_call_is_clean() {
    for (interp, cases, clean) in [
        (PYTHON, PYTHON_CASES, "print(1 + 1)"),
        (JAVASCRIPT, JAVASCRIPT_CASES, "console.log(1 + 1)"),
    ] {
        // The host has an environment (PATH, HOME, ...); the code sees none of it.
        // Code expected to loop runs under the short limit; the rest under a
        // generous one, so only the expected kind can end it.
        let strict = interpreter(interp, hostile_policy(TIMEOUT)).await;
        let patient = interpreter(interp, hostile_policy(PATIENT)).await;
        for (code, kind, needle) in cases {
            let host = if *kind == Some(ErrorKind::Timeout) {
                &strict
            } else {
                &patient
            };
            let result = run(host, interp, code).await;
            let (got, text) = match &result.error {
                Some(error) => (Some(error.kind), error.message.clone()),
                None => (None, result.content.clone()),
            };
            assert_eq!(got, *kind, "{}: {code:?} ended as {result:?}", interp.1);
            assert!(
                text.contains(needle),
                "{}: {code:?}: {needle:?} not in {text}",
                interp.1
            );
            let next = run(host, interp, clean).await;
            assert_eq!(
                next.content, "stdout:\n2",
                "{}: after {code:?}: {next:?}",
                interp.1
            );
        }
    }
}

#[tokio::test]
async fn fuel_bounds_the_code_too() {
    for (interp, code) in [
        (PYTHON, "while True: pass"),
        (JAVASCRIPT, "while (true) {}"),
    ] {
        let host = interpreter(interp, Policy::default().fuel(200_000_000)).await;
        let result = run(&host, interp, code).await;
        assert_eq!(
            result.error.map(|e| e.kind),
            Some(ErrorKind::OutOfFuel),
            "{}",
            interp.1
        );
    }
}

#[tokio::test]
async fn granted_folders_only_and_never_out_of_them() {
    let data = temp_dir();
    std::fs::write(data.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.path().join("link")).unwrap();
    let policy = Policy::default().allow_dir(data.path(), "/data", DirMode::Ro);
    let cases = [
        (
            PYTHON,
            "open('/data/notes.txt').read().split()",
            "value:\n['alpha', 'beta']",
            [
                ("open('/data/../../etc/passwd').read()", "PermissionError"),
                ("open('/data/link').read()", "PermissionError"),
                ("open('/data/new.txt', 'w')", "PermissionError"),
                ("open('/etc/passwd').read()", "FileNotFoundError"),
            ],
        ),
        (
            JAVASCRIPT,
            "fs.readFile('/data/notes.txt').split('\\n').filter(Boolean)",
            "value:\n[\"alpha\", \"beta\"]",
            [
                ("fs.readFile('/data/../../etc/passwd')", "ENOENT"),
                ("fs.readFile('/data/link')", "EPERM"),
                ("fs.writeFile('/data/new.txt', 'x')", "EPERM"),
                ("fs.readFile('/proc/self/status')", "ENOENT"),
            ],
        ),
    ];
    for (interp, read, expected, refused) in cases {
        let host = interpreter(interp, policy.clone()).await;
        let result = run(&host, interp, read).await;
        assert_eq!(result.content, expected, "{result:?}");
        for (code, needle) in refused {
            let result = run(&host, interp, code).await;
            let error = result.error.unwrap_or_else(|| panic!("{code:?} must fail"));
            assert_eq!(error.kind, ErrorKind::Failed, "{code:?}");
            assert!(
                error.message.contains(needle),
                "{code:?}: {}",
                error.message
            );
        }
    }
    assert!(!data.path().join("new.txt").exists());
}

#[tokio::test]
async fn files_left_in_scratch_come_back_and_each_call_starts_empty() {
    let policy = Policy::default().scratch(true).max_write(ByteSize::mib(1));
    let cases = [
        (
            PYTHON,
            "import os, json\nprint(sorted(os.listdir('.')))\n\
             open('report.csv', 'w').write('a,b\\n1,2\\n')\n\
             os.mkdir('out')\njson.dump({'ok': True}, open('out/data.json', 'w'))",
            "open('big', 'wb').write(b'x' * (4 << 20))",
            "open('/scratch/x', 'w')",
        ),
        (
            JAVASCRIPT,
            "console.log(JSON.stringify(fs.readdir('.')));\n\
             fs.writeFile('report.csv', 'a,b\\n1,2\\n');\n\
             fs.mkdir('out'); fs.writeFile('out/data.json', JSON.stringify({ ok: true }));",
            "fs.writeFile('big', new Uint8Array(4 << 20))",
            "fs.writeFile('/scratch/x', 'x')",
        ),
    ];
    for (interp, code, flood, without_scratch) in cases {
        let host = interpreter(interp, policy.clone()).await;
        for _ in 0..2 {
            let result = run(&host, interp, code).await;
            assert!(result.is_ok(), "{result:?}");
            assert!(
                result.content.starts_with("stdout:\n[]"),
                "a fresh folder: {}",
                result.content
            );
            assert!(
                result.content.contains("report.csv (8 bytes)"),
                "{}",
                result.content
            );
            let mut kinds: Vec<_> = result.artifacts.iter().map(|a| a.kind.as_str()).collect();
            kinds.sort();
            assert_eq!(kinds, ["file:out/data.json", "file:report.csv"]);
            let report = result
                .artifacts
                .iter()
                .find(|a| a.kind == "file:report.csv");
            assert_eq!(report.unwrap().data, b"a,b\n1,2\n");
            let data = result
                .artifacts
                .iter()
                .find(|a| a.kind == "file:out/data.json");
            assert_eq!(data.unwrap().mime_type.as_deref(), Some("application/json"));
        }
        let flood = run(&host, interp, flood).await;
        let error = flood.error.expect("writing past max_write fails");
        assert_eq!(
            error.kind,
            ErrorKind::CapabilityDenied,
            "{}: {error}",
            interp.1
        );
        assert!(error.message.contains("max_write"), "{}", error.message);

        let without = interpreter(interp, Policy::default()).await;
        let result = run(&without, interp, without_scratch).await;
        assert_eq!(
            result.error.map(|e| e.kind),
            Some(ErrorKind::Failed),
            "no scratch unless granted"
        );
    }
}

#[test]
fn the_cli_runs_code_and_returns_the_scratch_files() {
    let python = polyglot("run_python").to_string_lossy().into_owned();
    let args = json!({"code": "open('a.txt', 'w').write('hello')\nprint('done')"}).to_string();
    let output = crate::common::run(&["call", &python, "run_python", &args, "--scratch", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        crate::common::stderr(&output)
    );
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert!(
        value["content"]
            .as_str()
            .unwrap()
            .starts_with("stdout:\ndone"),
        "{value}"
    );
    assert_eq!(value["artifacts"][0]["kind"], "file:a.txt", "{value}");

    let javascript = polyglot("run_javascript").to_string_lossy().into_owned();
    let args = json!({"code": "while (true) {}"}).to_string();
    let output = crate::common::run(&[
        "call",
        &javascript,
        "run_javascript",
        &args,
        "--timeout",
        "300ms",
    ]);
    crate::common::assert_clean_failure(&output, 1, "timeout");
}
