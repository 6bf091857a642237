//! Tools written in Python (componentize-py) and JavaScript (componentize-qjs):
//! the same contract, the same limits and the same error kinds as Rust tools.

use std::path::PathBuf;

use serde_json::{Value, json};
use wasm_agent::sandbox::CacheOutcome;
use wasm_agent::{ByteSize, CallContext, ErrorKind, LoadOptions, Policy, ToolHost};

use crate::common::{TIMEOUT, host, root};

/// A component built by `make polyglot` into `target/polyglot`.
pub fn polyglot(name: &str) -> PathBuf {
    let path = root().join("target/polyglot").join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `make setup` (or `make polyglot`) first",
        path.display()
    );
    path
}

/// The two language fixtures, with what their runtimes call a crash.
const FIXTURES: [(&str, &str); 2] = [("fixture-py", "KeyError"), ("fixture-js", "TypeError")];

async fn loaded(name: &str, policy: Policy) -> ToolHost {
    let host = host();
    host.load_with(polyglot(name), LoadOptions::new(policy).name(name))
        .await
        .unwrap_or_else(|e| panic!("{name} loads: {e}"));
    host
}

async fn call(host: &ToolHost, tool: &str, arguments: Value) -> wasm_agent::ToolCallResult {
    host.call(
        tool,
        &arguments.to_string(),
        &CallContext::new().session("s"),
    )
    .await
}

#[tokio::test]
async fn calls_succeed_and_failures_have_the_right_kinds() {
    for (fixture, crash) in FIXTURES {
        let host = loaded(fixture, Policy::default()).await;
        let echoed = call(&host, "echo", json!({"text": "héllo"})).await;
        assert_eq!(echoed.content, "héllo", "{fixture}: {echoed:?}");

        let invalid = call(&host, "echo", json!({"text": 5})).await;
        let error = invalid.error.expect("invalid arguments fail");
        assert_eq!(error.kind, ErrorKind::InvalidArguments, "{fixture}");
        assert!(
            error.message.contains("/text"),
            "{fixture}: {}",
            error.message
        );

        let failed = call(&host, "fail", json!({"message": "no such row"})).await;
        let error = failed.error.expect("fail fails");
        assert_eq!(error.kind, ErrorKind::Failed, "{fixture}");
        assert_eq!(error.message, "no such row", "{fixture}");

        let crashed = call(&host, "crash", json!({})).await;
        let error = crashed.error.expect("crash fails");
        assert_eq!(error.kind, ErrorKind::Failed, "{fixture}: {error}");
        assert!(
            error.message.contains(crash),
            "{fixture}: {}",
            error.message
        );
    }
}

#[tokio::test]
async fn endless_loops_and_memory_bombs_are_stopped_with_their_kinds() {
    for (fixture, _) in FIXTURES {
        let policy = Policy::default().timeout(TIMEOUT).memory(ByteSize::mib(64));
        let host = loaded(fixture, policy).await;
        let spun = call(&host, "spin", json!({})).await;
        assert_eq!(
            spun.error.map(|e| e.kind),
            Some(ErrorKind::Timeout),
            "{fixture}"
        );
        let bombed = call(&host, "alloc", json!({})).await;
        let error = bombed.error.expect("alloc fails");
        assert_eq!(error.kind, ErrorKind::MemoryLimit, "{fixture}: {error}");
        assert!(error.message.contains("64MiB"), "{fixture}: {error}");
        // The host and the component go on.
        let echoed = call(&host, "echo", json!({"text": "still here"})).await;
        assert_eq!(echoed.content, "still here", "{fixture}");
    }
}

#[tokio::test]
async fn state_and_dependencies_reach_the_tools() {
    for (fixture, _) in FIXTURES {
        let policy = Policy::default().dependency("api", "https://api.example");
        let host = loaded(fixture, policy).await;
        call(&host, "state", json!({"key": "k", "value": {"n": 1}})).await;
        let read = call(&host, "state", json!({"key": "k"})).await;
        let value: Value = serde_json::from_str(&read.content).expect("JSON");
        assert_eq!(value["now"], json!({"n": 1}), "{fixture}: {read:?}");
        let other = host
            .call("state", r#"{"key": "k"}"#, &CallContext::new().session("t"))
            .await;
        let value: Value = serde_json::from_str(&other.content).expect("JSON");
        assert_eq!(value["now"], Value::Null, "{fixture}: sessions are apart");

        let dependency = call(&host, "dependency", json!({"name": "api"})).await;
        assert_eq!(dependency.content, "https://api.example", "{fixture}");
    }
}

#[tokio::test]
async fn each_call_draws_its_own_random_numbers() {
    // An interpreter's state, its random generator's included, is a snapshot
    // taken at build time: each fresh instance must be seeded anew (the
    // JavaScript helper seeds Math.random from wasi:random on every call).
    for (fixture, _) in FIXTURES {
        let host = loaded(fixture, Policy::default()).await;
        let mut drawn = std::collections::HashSet::new();
        for _ in 0..5 {
            let random = call(&host, "random", json!({})).await;
            assert!(random.is_ok(), "{fixture}: {random:?}");
            let numbers: Vec<f64> = serde_json::from_str(&random.content).expect("three numbers");
            assert!(
                numbers.iter().all(|x| (0.0..1.0).contains(x)),
                "{fixture}: {numbers:?}"
            );
            drawn.insert(random.content);
        }
        assert_eq!(drawn.len(), 5, "{fixture}: {drawn:?}");
    }
}

#[tokio::test]
async fn a_promise_without_an_event_loop_fails_naming_the_engine() {
    let host = loaded("fixture-js", Policy::default()).await;
    let later = call(&host, "later", json!({})).await;
    let error = later.error.expect("a promise cannot be waited for");
    assert_eq!(error.kind, ErrorKind::Failed, "{error}");
    assert!(error.message.contains("no event loop"), "{error}");
    let echoed = call(&host, "echo", json!({"text": "still here"})).await;
    assert_eq!(echoed.content, "still here");
}

#[tokio::test]
async fn the_python_example_measures_texts_and_tables() {
    let host = loaded("textstats", Policy::default()).await;
    let stats = call(
        &host,
        "text_stats",
        json!({"text": "The cat sat. The cat ran!"}),
    )
    .await;
    assert!(stats.is_ok(), "{stats:?}");
    assert!(stats.content.contains("6 words"), "{}", stats.content);
    assert!(stats.content.contains("2 sentences"), "{}", stats.content);
    let artifact = &stats.artifacts[0];
    assert_eq!(artifact.mime_type.as_deref(), Some("application/json"));

    let csv = "name,age\nada,36\nalan,41\n";
    let summary = call(&host, "csv_summary", json!({"csv_text": csv})).await;
    assert!(summary.is_ok(), "{summary:?}");
    assert!(summary.content.contains("age"), "{}", summary.content);
    assert!(
        summary.content.contains("38.5"),
        "the mean age: {}",
        summary.content
    );
}

#[tokio::test]
async fn the_javascript_example_lays_out_markdown() {
    let host = loaded("mdtable", Policy::default()).await;
    let table = call(
        &host,
        "markdown_table",
        json!({"rows": [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]}),
    )
    .await;
    assert!(table.is_ok(), "{table:?}");
    let lines: Vec<&str> = table.content.lines().collect();
    assert_eq!(lines.len(), 4, "{}", table.content);
    // The number column aligns right, the text one left, in either order.
    let (header, rule) = (cells(lines[0]), cells(lines[1]));
    let age = header
        .iter()
        .position(|c| *c == "age")
        .expect("an age column");
    let name = header
        .iter()
        .position(|c| *c == "name")
        .expect("a name column");
    assert!(rule[age].ends_with(':'), "{}", table.content);
    assert!(rule[name].starts_with(':'), "{}", table.content);

    let toc = call(
        &host,
        "markdown_toc",
        json!({"markdown": "# Title\n## Getting started\ntext\n## API\n"}),
    )
    .await;
    assert!(toc.is_ok(), "{toc:?}");
    assert!(
        toc.content.contains("(#getting-started)"),
        "{}",
        toc.content
    );
}

/// The cells of a Markdown table row.
fn cells(row: &str) -> Vec<&str> {
    row.trim_matches('|').split('|').map(str::trim).collect()
}

#[tokio::test]
async fn big_components_load_fast_from_the_compile_cache() {
    for name in ["fixture-py", "fixture-js"] {
        // The first load may compile; the next one must come from the cache.
        loaded(name, Policy::default()).await;
        let report = host()
            .load_with(
                polyglot(name),
                LoadOptions::new(Policy::default()).name(name),
            )
            .await
            .unwrap();
        assert_eq!(report.cache, CacheOutcome::Hit, "{name}");
        assert!(
            report.load_time.as_millis() < 2000,
            "{name} took {:?} from the cache",
            report.load_time
        );
    }
}

/// Their interpreters are shared libraries linked at instantiation time,
/// whose function table the engine would fill entry by entry on every call;
/// relinked before they compile, the table is filled lazily. What is left
/// filled eagerly is the small table of host-function trampolines.
#[test]
fn python_and_javascript_components_compile_relinked_with_their_tables_filled_lazily() {
    for name in ["fixture-py", "fixture-js"] {
        let bytes = std::fs::read(polyglot(name)).unwrap();
        let before = wasm_agent_relink::eagerly_filled_table_entries(&bytes).unwrap();
        let relinked = wasm_agent_relink::relink(&bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name} has modules to merge"));
        let after = wasm_agent_relink::eagerly_filled_table_entries(&relinked.bytes).unwrap();
        assert!(
            relinked.merged >= 3,
            "{name}: {} modules merged",
            relinked.merged
        );
        assert!(
            after * 8 < before,
            "{name}: {before} entries filled on every instantiation before, {after} after"
        );
    }
}
