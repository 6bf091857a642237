//! `wasm-agent run --cache redis://...`: results shared by separate runs
//! (as replicas would share them) through a real Redis on 127.0.0.1, kept
//! apart by tenant and component version, and runs that go on uncached
//! when Redis is down.

use std::path::Path;

use serde_json::Value;

use crate::agent_cli::run;
use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir};
use crate::provider_server::{ProviderServer, openai};
use crate::redis::Redis;

/// A config loading `calculator` (a file) with its results cached 5 minutes.
fn config(dir: &Path, calculator: &Path, cache: Option<&str>) -> String {
    let path = dir.join("wasm-agent.toml");
    let cache = cache
        .map(|url| format!("cache = \"{url}\"\n"))
        .unwrap_or_default();
    let text = format!(
        "{cache}[tools.calc]\ncomponent = \"{}\"\n\n[agent]\n\n[agent.tools.calculate]\ncache_ttl = \"5m\"\n",
        calculator.display()
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// One `run` asking for 2+3 through the calculator; its single tool call.
async fn ask(config: &str, extra: &[&str]) -> (Value, String) {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "calculate", r#"{"expression": "2+3"}"#)]),
        openai::text("5."),
    ])
    .await;
    let url = server.openai_url();
    let mut args: Vec<String> = ["2+3?", "--model", "openai:m", "--base-url", &url]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--config".into(), config.into(), "--json".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let output = run(args, "").await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let call = result["tool_calls"][0].clone();
    assert_eq!(call["content"], "5", "{result}");
    (call, stderr(&output))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_share_results_per_tenant_and_component_version() {
    let redis = Redis::start();
    let dir = temp_dir();
    let original = component("calculator");
    let config = config(dir.path(), &original, Some(&redis.url()));

    let (first, warned) = ask(&config, &["--tenant", "acme"]).await;
    assert_eq!(first["cached"], false);
    // The config's settings are in their old place: they apply, and the
    // warning names the new one.
    assert!(
        warned.contains("[agent.tools.calculate] is deprecated")
            && warned.contains("[calls.calculate]"),
        "{warned}"
    );
    let (again, _) = ask(&config, &["--tenant", "acme"]).await;
    assert_eq!(
        again["cached"], true,
        "a second process reads the first's result"
    );
    let (other, _) = ask(&config, &["--tenant", "globex"]).await;
    assert_eq!(
        other["cached"], false,
        "another tenant never sees acme's result"
    );
    let (untenanted, _) = ask(&config, &[]).await;
    assert_eq!(untenanted["cached"], false);
    assert_eq!(redis.command(&["DBSIZE"]).as_deref(), Some(":3"));

    // The same tool from a changed component (one more custom section:
    // other bytes, other digest) starts afresh.
    let mut bytes = std::fs::read(&original).unwrap();
    bytes.extend_from_slice(&[0, 4, 3, b'v', b'e', b'r']);
    let changed = dir.path().join("calculator-v2.wasm");
    std::fs::write(&changed, bytes).unwrap();
    let changed_config = config_in(dir.path(), "v2", &changed, &redis.url());
    let (new_version, _) = ask(&changed_config, &["--tenant", "acme"]).await;
    assert_eq!(new_version["cached"], false);
    let (new_again, _) = ask(&changed_config, &["--tenant", "acme"]).await;
    assert_eq!(new_again["cached"], true);

    // --cache overrides the config: memory keeps nothing between runs.
    let (memory, _) = ask(&config, &["--tenant", "acme", "--cache", "memory:"]).await;
    assert_eq!(memory["cached"], false);
}

fn config_in(dir: &Path, name: &str, calculator: &Path, url: &str) -> String {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    config(&sub, calculator, Some(url))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_is_down_leaves_runs_uncached_with_a_warning() {
    let redis = Redis::start();
    let port = redis.port();
    redis.stop();
    let dir = temp_dir();
    let config = config(dir.path(), &component("calculator"), None);
    let url = format!("redis://:hunter2@127.0.0.1:{port}/0");
    for _ in 0..2 {
        let (call, err) = ask(&config, &["--cache", &url]).await;
        assert_eq!(call["cached"], false);
        assert!(
            err.contains(&format!(
                "result cache at redis://127.0.0.1:{port}/0 is unavailable"
            )),
            "{err}"
        );
        assert!(err.contains("uncached"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cache_urls_are_refused_naming_where() {
    let dir = temp_dir();
    let calculator = component("calculator");
    let output = run(
        vec![
            "hi".into(),
            "--model".into(),
            "openai:m".into(),
            "--cache".into(),
            "memcached://u:pw@h".into(),
        ],
        "",
    )
    .await;
    assert_clean_failure(&output, 2, "--cache");
    assert!(
        stderr(&output).contains("use redis://HOST:PORT"),
        "{}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains("pw@"), "{}", stderr(&output));

    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        format!(
            "cache = 5\n[tools.calc]\ncomponent = \"{}\"\n",
            calculator.display()
        ),
    )
    .unwrap();
    let output = run(
        vec![
            "hi".into(),
            "--model".into(),
            "openai:m".into(),
            "--config".into(),
            path.display().to_string(),
        ],
        "",
    )
    .await;
    assert_clean_failure(&output, 2, "bad.toml:1");
    assert!(stderr(&output).contains("cache"), "{}", stderr(&output));
}
