//! Scripts on Monty (`run_monty`, world `interpreter`) through the real CLI:
//! a script pauses at each tool call, its state leaves the instance, the
//! calls run down the call pipeline (together when gathered), and the
//! script goes on in a fresh instance. Budgets hold across the pauses, and
//! hostile scripts are stopped with the exact kind.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{component, run, stderr, stdout, temp_dir};

/// `wasm-agent call run_monty.wasm run_monty` with `code`, the calculator,
/// JSON and fixture tools to call as `grants` allow, and `flags`.
fn script(code: &str, grants: &[&str], flags: &[&str]) -> std::process::Output {
    let monty = component("run_monty").display().to_string();
    let arguments = json!({ "code": code }).to_string();
    let mut args = vec!["call".to_string(), monty, "run_monty".into(), arguments];
    for name in ["calculator", "json", "fixture_tool"] {
        args.push("--with".into());
        args.push(component(name).display().to_string());
    }
    for grant in grants {
        args.push("--allow-call-tool".into());
        args.push(grant.to_string());
    }
    args.extend(flags.iter().map(|flag| flag.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

/// The call's result as `--json` prints it.
fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(output))
        .unwrap_or_else(|e| panic!("{e}: {} / {}", stdout(output), stderr(output)))
}

#[test]
fn a_script_calls_three_tools_each_down_the_pipeline() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let code = "import json\n\
                total = await calculate(expression='3 * 12.5 + 2 * 24.99')\n\
                name = json.loads(await json_query(document='{\"user\": {\"name\": \"ada\"}}', path='user.name'))\n\
                taxed = await call_tool('calculate', {'expression': total + ' * 1.08'})\n\
                print('for', name)\n\
                round(float(taxed), 2)";
    let output = script(
        code,
        &["calculate", "json_query"],
        &["--json", "--audit", audit.to_str().unwrap()],
    );
    let result = json_of(&output);
    assert_eq!(result["error"], Value::Null, "{result}");
    assert_eq!(
        result["content"], "stdout:\nfor ada\n\nvalue:\n94.48",
        "{result}"
    );
    // Four records: the three calls the script made, at depth 1, and the
    // script's own call.
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|record: &Value| record["tool"].is_string())
        .collect();
    let tools: Vec<(&str, u64)> = records
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap(),
                r["depth"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("calculate", 1),
            ("json_query", 1),
            ("calculate", 1),
            ("run_monty", 0)
        ],
        "{records:#?}"
    );
}

#[test]
fn an_interpreter_may_not_ask_delegate_or_keep_its_instance() {
    let monty = component("run_monty").display().to_string();
    for flags in [
        &["--ask", "http://127.0.0.1:9"][..],
        &["--allow-delegate", "helper"],
        &["--keep-instance"],
    ] {
        let mut args = vec!["call", &monty, "run_monty", "{\"code\": \"1\"}"];
        args.extend_from_slice(flags);
        let output = run(&args);
        crate::common::assert_clean_failure(
            &output,
            2,
            "it is an interpreter, whose scripts run in segments, so its policy may not",
        );
    }
}

#[test]
fn gathered_calls_run_at_once() {
    let code = "import asyncio\n\
                a, b, c = await asyncio.gather(sleep(ms=1500), sleep(ms=1500), sleep(ms=1500))\n\
                [a, b, c]";
    let started = Instant::now();
    let output = script(code, &["sleep"], &["--json"]);
    let took = started.elapsed();
    let result = json_of(&output);
    assert_eq!(
        result["content"], "value:\n['slept', 'slept', 'slept']",
        "{result}"
    );
    // One after the other they would take 4.5 s.
    assert!(took < Duration::from_millis(4000), "{took:?}");
}

#[test]
fn a_waiting_script_holds_no_call_slot() {
    // One slot in all: a script that kept its slot while its call waited
    // for one would wait until its deadline.
    let code = "a = await calculate(expression='6 * 7')\nb = await sleep(ms=10)\n(a, b)";
    let output = script(
        code,
        &["calculate", "sleep"],
        &["--json", "--max-concurrency", "1", "--timeout", "5s"],
    );
    let result = json_of(&output);
    assert_eq!(result["content"], "value:\n('42', 'slept')", "{result}");
}

#[test]
fn a_script_written_without_await_gets_each_result() {
    // Models often call tools as plain functions: the script is taken back
    // to the first call, which no host has run yet, and from there each
    // call is answered before the script goes on.
    let code = "x = calculate(expression='2 * 3')\n\
                print('x is', x)\n\
                y = calculate(expression=x + ' + 1')\n\
                int(y) * 10";
    let output = script(code, &["calculate"], &["--json"]);
    let result = json_of(&output);
    assert_eq!(
        result["content"], "stdout:\nx is 6\n\nvalue:\n70",
        "{result}"
    );
}

#[test]
fn tool_errors_reach_the_script_and_unknown_names_list_the_tools() {
    let code = "try:\n    await calculate(expression='1/')\nexcept RuntimeError as e:\n    print('caught:', e)\n'done'";
    let result = json_of(&script(code, &["calculate"], &["--json"]));
    let content = result["content"].as_str().unwrap();
    assert!(
        content.starts_with("stdout:\ncaught: tool call failed (failed): cannot evaluate"),
        "{content}"
    );
    let output = script("await fetch_secrets()", &["calculate"], &["--json"]);
    let result = json_of(&output);
    assert_eq!(result["error"]["kind"], "failed", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "NameError: name \"fetch_secrets\" is not defined (the tools this script may \
             call: calculate)"
        ),
        "{message}"
    );
}

#[test]
fn a_script_that_defines_a_tool_of_its_own_is_told_to_call_it() {
    // What a small model wrote, seen with a real one: stubs of the tools.
    let code = "def calculate(expression):\n    return str(eval(expression))\n\ncalculate('1 + 1')";
    let result = json_of(&script(code, &["calculate"], &["--json"]));
    assert_eq!(result["error"]["kind"], "failed", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("defines calculate(), which is a tool the host provides"),
        "{message}"
    );
    // Other functions of its own are fine.
    let code = "def double(x):\n    return x * 2\ndouble(await calculate(expression='21'))";
    let result = json_of(&script(code, &["calculate"], &["--json"]));
    assert_eq!(result["content"], "value:\n'2121'", "{result}");
}

#[test]
fn budgets_hold_across_pauses() {
    // Calls: at most 64 in all, whatever the segments.
    let code = "n = 0\nfor i in range(70):\n    try:\n        await calculate(expression='1')\n        n += 1\n    except RuntimeError as e:\n        print(e)\n        break\nn";
    let result = json_of(&script(code, &["calculate"], &["--json"]));
    assert_eq!(
        result["content"],
        "stdout:\ntool call failed (capability_denied): a call may call other tools at most 64 \
         times\n\nvalue:\n64",
        "{result}"
    );
    // Fuel: each segment alone fits the budget, all of them do not.
    let code = "for j in range(50):\n    s = 0\n    for i in range(20000):\n        s += i\n    await calculate(expression='1')\n'all done'";
    let alone = script(
        "s = 0\nfor i in range(20000):\n    s += i\ns",
        &[],
        &["--json", "--fuel", "200000000"],
    );
    assert_eq!(json_of(&alone)["error"], Value::Null, "{}", stdout(&alone));
    let output = script(code, &["calculate"], &["--json", "--fuel", "200000000"]);
    let result = json_of(&output);
    assert_eq!(result["error"]["kind"], "out_of_fuel", "{result}");
    // Time: the segments' time counts, the calls' waiting does not.
    let waits = "for i in range(4):\n    await sleep(ms=400)\n'waited'";
    let output = script(waits, &["sleep"], &["--json", "--timeout", "1s"]);
    assert_eq!(json_of(&output)["content"], "value:\n'waited'");
    let spins = "import datetime\nfor i in range(4):\n    start = datetime.datetime.now()\n    while (datetime.datetime.now() - start).total_seconds() < 0.4:\n        pass\n    await sleep(ms=1)\n'spun'";
    let output = script(spins, &["sleep"], &["--json", "--timeout", "1s"]);
    assert_eq!(
        json_of(&output)["error"]["kind"],
        "timeout",
        "{}",
        stdout(&output)
    );
}

#[test]
fn hostile_scripts_are_stopped_with_the_exact_kind() {
    let cases: [(&str, &[&str], &str); 5] = [
        ("while True:\n    pass", &["--timeout", "500ms"], "timeout"),
        (
            "x = []\nwhile True:\n    x.append('a' * 100000)",
            &["--memory", "64MiB"],
            "memory_limit",
        ),
        ("def f(n):\n    return f(n + 1)\nf(0)", &[], "failed"),
        (
            "x = [str(i) * 100 for i in range(30000)]\nawait calculate(expression='1')",
            &["--memory", "256MiB"],
            "output_too_large",
        ),
        (
            "import asyncio\nawait asyncio.gather(*[calculate(expression='1') for i in range(100)])",
            &[],
            "capability_denied",
        ),
    ];
    for (code, flags, kind) in cases {
        let mut all = vec!["--json"];
        all.extend_from_slice(flags);
        let output = script(code, &["calculate"], &all);
        let result = json_of(&output);
        assert_eq!(result["error"]["kind"], kind, "{code}: {result}");
    }
    let deep = json_of(&script(
        "def f(n):\n    return f(n + 1)\nf(0)",
        &[],
        &["--json"],
    ));
    assert!(
        deep["error"]["message"]
            .as_str()
            .unwrap()
            .contains("RecursionError: maximum recursion depth exceeded"),
        "{deep}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_mode_runs_python_on_monty_by_default() {
    use crate::provider_server::{ProviderServer, openai};
    let code = "import asyncio\n\
                total, name = await asyncio.gather(\n\
                    calculate(expression='6 * 7'),\n\
                    json_query(document='{\"who\": \"ada\"}', path='who'))\n\
                print(name, total)";
    let arguments = json!({ "code": code }).to_string();
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "run_code", &arguments)]),
        openai::text("done"),
    ])
    .await;
    let mut args = vec![
        "run".to_string(),
        "Who and how much?".into(),
        "--model".into(),
        "openai:gpt-4o-mini".into(),
        "--json".into(),
        "--base-url".into(),
        server.openai_url(),
        "--code-mode=python".into(),
    ];
    for name in ["calculator", "json", "run_monty"] {
        args.push("--tools".into());
        args.push(component(name).display().to_string());
    }
    let output = tokio::task::spawn_blocking(move || {
        crate::common::wasm_agent()
            .args(&args)
            .env("OPENAI_API_KEY", "sk-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(
        result["tool_calls"][0]["content"], "stdout:\n\"ada\" 42",
        "{result}"
    );
    let tools = &server.requests()[0].body["tools"];
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    let description = tools[0]["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("- await calculate(expression: str) -> str"),
        "{description}"
    );
    assert!(description.contains("Monty"), "{description}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_call_that_needs_approval_is_asked_at_the_terminal() {
    let dir = temp_dir();
    let config = crate::common::calculator_needing_approval(dir.path());
    let code = "try:\n    print(await calculate(expression=\"6 * 7\"))\nexcept RuntimeError as e:\n    print(\"refused:\", e)";
    let arguments = json!({ "code": code }).to_string();
    for (answer, printed) in [
        ("y", "stdout:\\n42"),
        ("n", "stdout:\\nrefused: tool call failed (denied)"),
    ] {
        let command = format!(
            "{} call {} run_monty '{arguments}' --config {} --with calc \
             --allow-call-tool calculate --json",
            env!("CARGO_BIN_EXE_wasm-agent"),
            component("run_monty").display(),
            config.display(),
        );
        let output = crate::common::on_a_terminal(command, answer).await;
        let text = stdout(&output);
        assert!(text.contains("calculate"), "{text}");
        assert!(text.contains(printed), "{answer}: {text}");
    }
}
