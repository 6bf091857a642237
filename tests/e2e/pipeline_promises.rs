//! The call pipeline's promises, each held through every entry point
//! (`entries`: `call`, `run`, `serve --stdio`, `serve --http`), with tools
//! calling tools in each: nested calls take the approval step; every answer
//! is audited and none is given from the cache while a fail-closed log
//! cannot be written; cached results never cross principals; "allow for
//! this session" covers exactly the arguments asked about; a deadline ends
//! a call (and the calls it makes) alike everywhere.

use std::path::Path;

use serde_json::{Value, json};

use crate::audit::calls;
use crate::common::{component, temp_dir};
use crate::entries::{ENTRIES, Entry, Request, call_through};
use crate::mcp::path;
use crate::polyglot::polyglot;

/// A config with `run_python` (alias `py`, may call `echo` and
/// `state_set`), the fixture (alias `fixture`), and `calls` as its
/// `[calls.*]` sections; `head` goes first (say, `cache = "..."`).
fn config(dir: &Path, head: &str, calls: &str) -> String {
    let file = dir.join("wasm-agent.toml");
    let text = format!(
        "{head}\n[tools.py]\ncomponent = \"{}\"\ncall_tools = [\"echo\", \"state_set\"]\n\n\
         [tools.fixture]\ncomponent = \"{}\"\n\n{calls}\n",
        path(&polyglot("run_python")),
        path(&component("fixture_tool")),
    );
    std::fs::write(&file, text).unwrap();
    path(&file)
}

/// The audit records of `tool` in `log`, once `done` holds for them.
async fn records_of(log: &Path, tool: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    crate::mcp::wait_for(
        || async {
            calls(log)
                .into_iter()
                .filter(|r| r["tool"] == tool)
                .collect::<Vec<_>>()
        },
        |records: &Vec<Value>| done(records),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_called_by_a_tool_takes_the_approval_step_in_every_entry_point() {
    let dir = temp_dir();
    let config = config(
        dir.path(),
        "",
        "[calls.echo]\nrequires_approval = \"always\"\n",
    );
    let code = json!({"code": "tools.echo(text='nested hello')"});
    for entry in ENTRIES {
        let log = dir.path().join(format!("{entry:?}.jsonl"));
        let log_flag = path(&log);
        let request = |flags| Request {
            config: &config,
            alias: "py",
            with: &["fixture"],
            tool: "run_python",
            arguments: code.clone(),
            flags,
        };
        let flags = ["--audit", log_flag.as_str()];
        let refused = call_through(entry, &request(&flags)).await;
        assert!(
            refused.kind.is_some() && refused.text.contains("--approve echo"),
            "{entry:?}: the nested call ran without approval: {refused:?}"
        );
        if matches!(entry, Entry::Call | Entry::Run) {
            // The terminal asker was asked, and said why nobody answered.
            assert!(
                refused.stderr.contains("no terminal to ask"),
                "{entry:?}: {refused:?}"
            );
        }
        let records = records_of(&log, "echo", |r| !r.is_empty()).await;
        assert_eq!(records[0]["depth"], 1, "{entry:?}: {records:?}");
        assert_eq!(records[0]["outcome"], "denied", "{entry:?}: {records:?}");
        assert!(
            records[0]["approval"]["by"].is_string(),
            "{entry:?}: {records:?}"
        );

        let flags = ["--audit", log_flag.as_str(), "--approve", "echo"];
        let approved = call_through(entry, &request(&flags)).await;
        assert_eq!(approved.kind, None, "{entry:?}: {approved:?}");
        assert!(
            approved.text.contains("nested hello"),
            "{entry:?}: {approved:?}"
        );
        let records = records_of(&log, "echo", |r| r.len() >= 2).await;
        assert_eq!(records[1]["outcome"], "ok", "{entry:?}: {records:?}");
        assert_eq!(
            records[1]["approval"]["decision"], "approved",
            "{entry:?}: {records:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_results_never_cross_principals_in_any_entry_point() {
    let redis = crate::redis::Redis::start();
    let dir = temp_dir();
    let config = config(
        dir.path(),
        &format!("cache = \"{}\"", redis.url()),
        "[calls.context]\ncache_ttl = \"5m\"\n",
    );
    // `context` answers with the caller's identity: a result computed for
    // one principal and served to another would show it.
    for entry in [Entry::Call, Entry::Run] {
        for user in ["alice", "bob"] {
            let flags = ["--user", user];
            let request = Request {
                config: &config,
                alias: "fixture",
                with: &[],
                tool: "context",
                arguments: json!({}),
                flags: &flags,
            };
            let answer = call_through(entry, &request).await;
            assert_eq!(answer.kind, None, "{entry:?}: {answer:?}");
            let context: Value = serde_json::from_str(&answer.text).unwrap();
            assert_eq!(context["user_id"], user, "{entry:?}: {context}");
        }
    }
    // Over HTTP the principal comes from the token; neither has a tenant.
    let tokens = dir.path().join("tokens.toml");
    let entry = |token: &str, principal: &str| {
        use sha2::Digest as _;
        let digest = hex::encode(sha2::Sha256::digest(token.as_bytes()));
        format!("[[tokens]]\nsha256 = \"{digest}\"\nprincipal = \"{principal}\"\n\n")
    };
    let text = [entry("alice-token", "alice"), entry("bob-token", "bob")].concat();
    std::fs::write(&tokens, text).unwrap();
    let server = crate::mcp::Server::start(&["--config", &config, "--tokens", &path(&tokens)]);
    for (token, user) in [("alice-token", "alice"), ("bob-token", "bob")] {
        let session = server.session(Some(token)).await;
        let answer = server
            .call_tool_authorized(&session, token, 2, "context", json!({}))
            .await;
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        let context: Value = serde_json::from_str(text).unwrap();
        assert_eq!(context["user_id"], user, "HTTP: {context}");
    }
}

/// Calls `call` until it is refused for want of the audit log (the writer
/// finds the log gone on its next write); the refusal, or the last answer
/// after 15 s of answers.
async fn until_refused<F, Fut>(mut call: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let mut last = Value::Null;
    for _ in 0..150 {
        last = call().await;
        if last["isError"] == true {
            return last;
        }
        assert_eq!(last["content"][0]["text"], "from the cache", "{last}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    last
}

fn refused_for_the_log(entry: Entry, result: &Value) {
    assert_eq!(
        result["structuredContent"]["error"]["kind"], "audit_unavailable",
        "{entry:?}: a cached answer went out while the audit log could not be written: {result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_comes_from_the_cache_while_a_fail_closed_log_cannot_be_written() {
    let cluster = std::sync::Arc::new(crate::postgres::Postgres::start());
    let audit = cluster.url();
    let redis = crate::redis::Redis::start();
    let dir = temp_dir();
    let config = config(
        dir.path(),
        &format!("cache = \"{}\"", redis.url()),
        "[calls.echo]\ncache_ttl = \"5m\"\n",
    );
    let arguments = json!({"text": "from the cache"});
    let flags = ["--audit", audit.as_str()];

    // `call`: separate processes share results through Redis.
    let request = Request {
        config: &config,
        alias: "fixture",
        with: &[],
        tool: "echo",
        arguments: arguments.clone(),
        flags: &flags,
    };
    let seeded = call_through(Entry::Call, &request).await;
    assert_eq!(seeded.text, "from the cache", "{seeded:?}");
    cluster.stop();
    let refused = call_through(Entry::Call, &request).await;
    assert!(refused.kind.is_some(), "call: {refused:?}");
    assert!(
        !refused.text.contains("from the cache"),
        "call: {refused:?}"
    );
    cluster.resume();

    // `serve --stdio` and `--http`: one process; the database stops under it.
    let serve_args = ["--config".to_string(), config.clone()]
        .into_iter()
        .chain(flags.iter().map(|f| f.to_string()))
        .collect::<Vec<_>>();
    let (args, shown, stopping) = (serve_args.clone(), arguments.clone(), cluster.clone());
    let result = tokio::task::spawn_blocking(move || {
        let mut server = crate::entries::StdioServer::start(&args, Vec::new());
        let first = server.call("echo", shown.clone());
        assert_eq!(first["content"][0]["text"], "from the cache", "{first}");
        stopping.stop();
        let mut last = Value::Null;
        for _ in 0..150 {
            last = server.call("echo", shown.clone());
            if last["isError"] == true {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        last
    })
    .await
    .unwrap();
    refused_for_the_log(Entry::Stdio, &result);
    cluster.resume();

    let http_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let server = crate::mcp::Server::start(&http_args);
    let session = server.session(None).await;
    let mut id = 1;
    let first = server
        .call_tool(&session, id, "echo", arguments.clone())
        .await;
    assert_eq!(first["result"]["content"][0]["text"], "from the cache");
    cluster.stop();
    let result = until_refused(|| {
        id += 1;
        let call = server.call_tool(&session, id, "echo", arguments.clone());
        async move { call.await["result"].clone() }
    })
    .await;
    refused_for_the_log(Entry::Http, &result);
    drop(server);
    cluster.resume();

    // `run`: the database stops between the model's turns.
    let stopping = cluster.clone();
    let echo = arguments.to_string();
    let provider = crate::provider_server::ProviderServer::with(move |_, index| {
        use crate::provider_server::openai;
        if index == 1 {
            stopping.stop();
        }
        match index {
            0..30 => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                openai::tool_calls(&[("call", "echo", &echo)])
            }
            _ => openai::text("done"),
        }
    })
    .await;
    let url = provider.openai_url();
    let mut args: Vec<String> = [
        "Go.",
        "--model",
        "openai:m",
        "--json",
        "--max-roundtrips",
        "40",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["--base-url".into(), url, "--config".into(), config.clone()]);
    args.extend(flags.iter().map(|f| f.to_string()));
    let output = crate::agent_cli::run(args, "").await;
    let printed: Value = serde_json::from_str(crate::common::stdout(&output).trim())
        .unwrap_or_else(|_| panic!("{}", crate::common::stderr(&output)));
    let kinds: Vec<Value> = printed["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["error"]["kind"].clone())
        .collect();
    let refused = kinds.iter().position(|k| k == "audit_unavailable");
    assert!(
        refused.is_some(),
        "run: cached answers kept coming while the audit database was down: {kinds:?}"
    );
    assert!(
        kinds[refused.unwrap()..]
            .iter()
            .all(|k| k == "audit_unavailable"),
        "run: {kinds:?}"
    );
}

/// Arguments of `state_set` whose decisive part (`command`) comes after
/// 400 characters of padding.
fn padded(command: &str, reordered: bool) -> Value {
    let pad = "x".repeat(400);
    match reordered {
        false => json!({"key": "k", "value": {"pad": pad, "command": command}}),
        true => json!({"value": {"command": command, "pad": pad}, "key": "k"}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_for_the_session_covers_exactly_the_arguments_asked_about() {
    let dir = temp_dir();
    let config = config(
        dir.path(),
        "",
        "[calls.state_set]\nrequires_approval = \"always\"\n",
    );
    let calls = [
        padded("ls", false),
        padded("ls", true),
        padded("rm -rf /", false),
    ];

    // MCP over stdio: the client's user allows the first for the session
    // and denies whatever else is asked.
    let args = vec![
        "--config".to_string(),
        config.clone(),
        "--ask-session".into(),
    ];
    let sent = calls.clone();
    let (results, asked) = tokio::task::spawn_blocking(move || {
        let mut server = crate::entries::StdioServer::start(&args, vec!["allow_session"]);
        let results: Vec<Value> = sent
            .into_iter()
            .map(|arguments| server.call("state_set", arguments))
            .collect();
        (results, std::mem::take(&mut server.asked))
    })
    .await
    .unwrap();
    assert_eq!(results[0]["isError"], false, "{results:?}");
    assert_eq!(results[1]["isError"], false, "remembered: {results:?}");
    assert_eq!(results[2]["isError"], true, "{results:?}");
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[1].contains("rm -rf /") && asked[1].contains("too long to show in full"),
        "{asked:?}"
    );

    // `run` at a terminal: "s" for the first question, and no answer to any
    // other (each waits 2 s).
    let replies = calls
        .iter()
        .map(|arguments| {
            crate::provider_server::openai::tool_calls(&[(
                "call",
                "state_set",
                &arguments.to_string(),
            )])
        })
        .chain([crate::provider_server::openai::text("done")])
        .collect();
    let provider = crate::provider_server::ProviderServer::start(replies).await;
    let command = format!(
        "{} run Go. --model openai:m --base-url {} --config {config} --json --ask-session \
         --ask-wait 2s",
        env!("CARGO_BIN_EXE_wasm-agent"),
        provider.openai_url(),
    );
    let output = crate::common::on_a_terminal(command, "s").await;
    let shown = crate::common::stdout(&output);
    // The terminal interleaves the echoed answer and the prompt with the output.
    let start = shown
        .find("{\"run_id\"")
        .unwrap_or_else(|| panic!("{shown}"));
    let line = shown[start..].lines().next().unwrap_or_default();
    let printed: Value = serde_json::from_str(line.trim()).unwrap();
    let kinds: Vec<&Value> = printed["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| &call["error"]["kind"])
        .collect();
    assert_eq!(
        kinds,
        [&Value::Null, &Value::Null, &json!("denied")],
        "{shown}"
    );
    assert!(shown.contains("rm -rf /"), "{shown}");

    // `call` at a terminal, the calls made by a script.
    let value = |command: &str| format!("{{'pad': 'x' * 400, 'command': '{command}'}}");
    let code = format!(
        "tools.state_set(key='k', value={})\n\
         tools.state_set(key='k', value={})\n\
         try:\n    tools.state_set(key='k', value={})\n    third = 'ran'\n\
         except Exception as e:\n    third = 'refused: ' + str(e)\n\
         third",
        value("ls"),
        value("ls"),
        value("rm -rf /"),
    );
    let arguments = json!({ "code": code }).to_string().replace('\'', "'\\''");
    let command = format!(
        "{} call py run_python '{arguments}' --with fixture --config {config} --json \
         --ask-session --ask-wait 2s",
        env!("CARGO_BIN_EXE_wasm-agent"),
    );
    let output = crate::common::on_a_terminal(command, "s").await;
    let shown = crate::common::stdout(&output);
    // Asked again about the third (and not answered), not remembered.
    assert!(shown.contains("'refused: state_set: denied"), "{shown}");
    assert!(shown.contains("did not answer"), "{shown}");
    assert_eq!(shown.matches("[approval]").count(), 2, "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_tool_takes_the_same_steps_and_every_answer_is_recorded() {
    let dir = temp_dir();
    // Only the remote server's tools: its `echo`, under `[calls.echo]`.
    let config = path(&dir.path().join("wasm-agent.toml"));
    std::fs::write(
        &config,
        "[calls.echo]\nrequires_approval = \"always\"\ncache_ttl = \"5m\"\n",
    )
    .unwrap();
    let log = dir.path().join("audit.jsonl");
    let remote = crate::remote_mcp::serve_fixture("");
    let run_with = |flags: Vec<String>| {
        let (remote, config, log) = (remote.clone(), config.clone(), path(&log));
        async move {
            let provider = crate::provider_server::ProviderServer::start(vec![
                crate::provider_server::openai::tool_calls(&[(
                    "c1",
                    "echo",
                    r#"{"text": "from afar"}"#,
                )]),
                crate::provider_server::openai::tool_calls(&[(
                    "c2",
                    "echo",
                    r#"{"text": "from afar"}"#,
                )]),
                crate::provider_server::openai::text("done"),
            ])
            .await;
            let mut args: Vec<String> = ["Go.", "--model", "openai:m", "--json", "--audit", &log]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend([
                "--base-url".into(),
                provider.openai_url(),
                "--mcp".into(),
                remote,
            ]);
            args.extend(["--config".into(), config]);
            args.extend(flags);
            let output = crate::agent_cli::run(args, "").await;
            let printed: Value = serde_json::from_str(crate::common::stdout(&output).trim())
                .unwrap_or_else(|_| panic!("{}", crate::common::stderr(&output)));
            printed["tool_calls"].as_array().unwrap().clone()
        }
    };
    let refused = run_with(Vec::new()).await;
    assert_eq!(refused[0]["error"]["kind"], "denied", "{refused:?}");
    let approved = run_with(vec!["--approve".into(), "echo".into()]).await;
    assert_eq!(approved[0]["content"], "from afar", "{approved:?}");
    assert_eq!(approved[1]["cached"], true, "{approved:?}");
    let records = records_of(&log, "echo", |r| r.len() >= 4).await;
    let remote_records: Vec<&Value> = records
        .iter()
        .filter(|r| r["remote"]["origin"].is_string())
        .collect();
    assert_eq!(remote_records.len(), 4, "{records:#?}");
    let outcomes: Vec<(&Value, &Value)> = records
        .iter()
        .map(|r| (&r["outcome"], &r["cached"]))
        .collect();
    assert_eq!(outcomes[0].0, "denied", "{records:#?}");
    assert_eq!(outcomes[2].0, "ok", "{records:#?}");
    assert_eq!(outcomes[3], (&json!("ok"), &json!(true)), "{records:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_ends_the_call_alike_in_every_entry_point() {
    let dir = temp_dir();
    // The script's call has 2 s; the tool it calls would have 10 s: the
    // tool called runs within the deadline of the call that called it.
    let config = path(&dir.path().join("wasm-agent.toml"));
    let text = format!(
        "[tools.py]\ncomponent = \"{}\"\ncall_tools = [\"sleep\"]\ntimeout = \"2s\"\n\n\
         [tools.fixture]\ncomponent = \"{}\"\n",
        path(&polyglot("run_python")),
        path(&component("fixture_tool")),
    );
    std::fs::write(&config, text).unwrap();
    let direct = json!({"ms": 20000});
    let nested = json!({"code": "tools.sleep(ms=20000)"});
    for entry in ENTRIES {
        let cases = [
            Request {
                config: &config,
                alias: "fixture",
                with: &[],
                tool: "sleep",
                arguments: direct.clone(),
                flags: &["--timeout", "2s"],
            },
            Request {
                config: &config,
                alias: "py",
                with: &["fixture"],
                tool: "run_python",
                arguments: nested.clone(),
                flags: &[],
            },
        ];
        for request in cases {
            let (started, tool) = (std::time::Instant::now(), request.tool);
            let answer = call_through(entry, &request).await;
            assert_eq!(
                answer.kind.as_deref(),
                Some("timeout"),
                "{entry:?} {tool}: {answer:?}"
            );
            assert!(
                answer.text.contains("time limit of 2s"),
                "{entry:?} {tool}: {answer:?}"
            );
            assert!(
                started.elapsed() < std::time::Duration::from_secs(15),
                "{entry:?} {tool}: the call outlived its deadline"
            );
        }
    }
}
