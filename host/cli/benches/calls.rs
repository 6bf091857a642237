//! `make bench`: warm isolated calls, throughput, cold loads, and the same
//! trivial tool as a Node.js subprocess per call (the subprocess sandbox).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_agent::audit::{AuditLog, AuditOptions};
use wasm_agent::sandbox::CacheOutcome;
use wasm_agent::{CallContext, Policy, ToolHost};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WARM_CALLS: usize = 20_000;
const SUBPROCESS_CALLS: usize = 30;
const POLYGLOT_CALLS: usize = 400;
/// Sequential calls per round of the audit-cost comparison (the 16 tasks
/// make as many between them, in eighths).
const AUDIT_CALLS: usize = 3_000;
/// Rounds of the audit-cost comparison.
const AUDIT_ROUNDS: usize = 9;

/// A component `make setup` built into `target/FOLDER`.
fn built(folder: &str, name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .join(folder)
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `make setup`",
        path.display()
    );
    path
}

/// A Rust guest.
fn component(name: &str) -> PathBuf {
    built("wasm32-wasip2/release", name)
}

/// The Python and JavaScript tools.
fn polyglot(name: &str) -> PathBuf {
    built("polyglot", name)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Sorted latencies of `calls` calls of `echo`, after `calls / 20` to warm up.
async fn warm_latency(host: &ToolHost, calls: usize) -> Vec<Duration> {
    warm_calls(host, "echo", r#"{"text":"hi"}"#, "hi", calls).await
}

/// Sorted latencies of `calls` calls of `tool` with `arguments`, each
/// answering `expected`, after `calls / 20` to warm up.
async fn warm_calls(
    host: &ToolHost,
    tool: &str,
    arguments: &str,
    expected: &str,
    calls: usize,
) -> Vec<Duration> {
    let context = CallContext::new();
    for _ in 0..calls / 20 {
        host.call(tool, arguments, &context).await;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let result = host.call(tool, arguments, &context).await;
        samples.push(started.elapsed());
        assert_eq!(result.content, expected, "{result:?}");
    }
    samples.sort();
    samples
}

async fn throughput(host: &ToolHost, tasks: usize, calls_per_task: usize) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move {
                let context = CallContext::new();
                for _ in 0..calls_per_task {
                    let result = host.call("echo", r#"{"text":"hi"}"#, &context).await;
                    assert!(result.is_ok(), "{result:?}");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    (tasks * calls_per_task) as f64 / started.elapsed().as_secs_f64()
}

/// A load in a fresh host: the whole of it (with `list-tools`), the
/// compile-or-cache part, and where the code came from.
async fn cold_load(path: &Path, cache: &Path) -> (Duration, Duration, CacheOutcome) {
    let host = ToolHost::builder().cache_dir(cache).build().expect("host");
    let started = Instant::now();
    let report = host.load(path, Policy::default()).await.expect("load");
    (started.elapsed(), report.load_time, report.cache)
}

/// What the audit log costs a call: the same warm calls and throughput
/// without and with it, and on a second host without it (how far two equal
/// hosts differ on this machine: the noise), in rounds whose order rotates
/// (medians of nine), and whether every call made it into the log.
async fn audit_cost(echo: &Path, cache: &Path) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("audit.jsonl");
    let log = Arc::new(AuditLog::open(AuditOptions::new(&file)).expect("audit log"));
    let plain = || ToolHost::builder().cache_dir(cache).build().expect("host");
    let audited = ToolHost::builder()
        .cache_dir(cache)
        .auditor(log.clone())
        .build()
        .expect("host");
    let hosts = [plain(), plain(), audited];
    for host in &hosts {
        host.load(echo, Policy::default()).await.expect("load");
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut latency, mut rate) = (<[Vec<f64>; 3]>::default(), <[Vec<f64>; 3]>::default());
    for round in 0..AUDIT_ROUNDS {
        for turn in 0..hosts.len() {
            let i = (round + turn) % hosts.len();
            let warm = warm_latency(&hosts[i], AUDIT_CALLS).await;
            latency[i].push(percentile(&warm, 0.50).as_secs_f64());
            rate[i].push(throughput(&hosts[i], 16, AUDIT_CALLS / 8).await);
        }
    }
    log.flush().expect("audit log flushed");
    let made = AUDIT_ROUNDS * (AUDIT_CALLS + AUDIT_CALLS / 20 + 16 * (AUDIT_CALLS / 8));
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let recorded = text
        .lines()
        .filter(|l| l.contains(r#""event":"call""#))
        .count();
    let [plain_p50, again_p50, audited_p50] = latency.map(median);
    let [plain_rate, again_rate, audited_rate] = rate.map(median);
    let change = |with: f64, without: f64| format!("{:+.1}%", (with / without - 1.0) * 100.0);
    let us = |s: f64| micros(Duration::from_secs_f64(s));
    println!(
        "| warm call p50 without the audit log / on a second such host (noise) / with it | {} / {} ({}) / {} ({}) |",
        us(plain_p50),
        us(again_p50),
        change(again_p50, plain_p50),
        us(audited_p50),
        change(audited_p50, plain_p50)
    );
    println!(
        "| calls/s with 16 tasks, the same three | {plain_rate:.0} / {again_rate:.0} ({}) / {audited_rate:.0} ({}) |",
        change(again_rate, plain_rate),
        change(audited_rate, plain_rate)
    );
    println!("| audited calls recorded | {recorded} of {made} |");
}

fn node_subprocess() -> Option<Vec<Duration>> {
    let script = "process.stdout.write(JSON.parse(process.argv[1]).text)";
    let mut samples = Vec::new();
    for _ in 0..SUBPROCESS_CALLS {
        let started = Instant::now();
        let output = Command::new("node")
            .args(["-e", script, r#"{"text":"hi"}"#])
            .output()
            .ok()?;
        samples.push(started.elapsed());
        assert_eq!(output.stdout, b"hi");
    }
    samples.sort();
    Some(samples)
}

#[tokio::main]
async fn main() {
    let echo = component("echo_tool");
    let cache = tempfile::tempdir().expect("temp dir");
    let host = ToolHost::builder()
        .cache_dir(cache.path())
        .build()
        .expect("host");
    host.load(&*echo, Policy::default()).await.expect("load");

    println!(
        "wasm-agent benchmark ({} cores, allocator: {:?})",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        host.allocator()
    );
    println!();
    // Measured on a runtime worker, like every call an embedder makes.
    let warm = tokio::spawn({
        let host = host.clone();
        async move { warm_latency(&host, WARM_CALLS).await }
    })
    .await
    .expect("latency task");
    let p50 = percentile(&warm, 0.50);
    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| warm isolated call p50 (fresh store + instantiate + validated call of `echo`) | {} |",
        micros(p50)
    );
    println!(
        "| warm isolated call p99 | {} |",
        micros(percentile(&warm, 0.99))
    );
    for tasks in [1, 2, 16, 64] {
        let rate = throughput(&host, tasks, 40_000 / tasks).await;
        println!("| calls/s with {tasks} parallel tasks | {rate:.0} |");
    }
    audit_cost(&echo, cache.path()).await;
    for name in ["echo_tool", "calculator", "files"] {
        let path = component(name);
        let dir = tempfile::tempdir().expect("temp dir");
        let (compile, _, first) = cold_load(&path, dir.path()).await;
        let (cached, mapped, second) = cold_load(&path, dir.path()).await;
        assert_eq!((first, second), (CacheOutcome::Compiled, CacheOutcome::Hit));
        let size = std::fs::metadata(&path).map_or(0, |m| m.len()) / 1024;
        println!(
            "| cold load of {name} ({size} KiB): compile | {} |",
            millis(compile)
        );
        println!(
            "| cold load of {name}: code from cache / whole load with `list-tools` | {} / {} |",
            millis(mapped),
            millis(cached)
        );
    }
    for (language, name) in [("Python", "fixture-py"), ("JavaScript", "fixture-js")] {
        let path = polyglot(name);
        let dir = tempfile::tempdir().expect("temp dir");
        let (compile, _, first) = cold_load(&path, dir.path()).await;
        let (cached, mapped, second) = cold_load(&path, dir.path()).await;
        assert_eq!((first, second), (CacheOutcome::Compiled, CacheOutcome::Hit));
        let size = std::fs::metadata(&path).map_or(0, |m| m.len()) / (1024 * 1024);
        println!(
            "| {language} tool ({name}, {size} MiB): compile | {} |",
            millis(compile)
        );
        println!(
            "| {language} tool: code from cache / whole load with `list-tools` | {} / {} |",
            millis(mapped),
            millis(cached)
        );
        let host = ToolHost::builder()
            .cache_dir(dir.path())
            .build()
            .expect("host");
        host.load(&*path, Policy::default()).await.expect("load");
        let warm = warm_latency(&host, POLYGLOT_CALLS).await;
        println!(
            "| {language} tool: warm call p50 / p99 of `echo` | {} / {} |",
            millis(percentile(&warm, 0.50)),
            millis(percentile(&warm, 0.99))
        );
    }
    // The interpreters for model-written code: a whole `print(1 + 1)` round
    // trip (fresh instance, parse, run, captured output).
    for (name, code) in [
        ("run_python", "print(1 + 1)"),
        ("run_javascript", "console.log(1 + 1)"),
    ] {
        let host = ToolHost::builder()
            .cache_dir(cache.path())
            .build()
            .expect("host");
        host.load(&*polyglot(name), Policy::default())
            .await
            .expect("load");
        let arguments = serde_json::json!({ "code": code }).to_string();
        let warm = warm_calls(&host, name, &arguments, "stdout:\n2", POLYGLOT_CALLS).await;
        println!(
            "| {name}: `{code}` round trip p50 / p99 | {} / {} |",
            millis(percentile(&warm, 0.50)),
            millis(percentile(&warm, 0.99))
        );
    }
    match node_subprocess() {
        Some(node) => {
            let node_p50 = percentile(&node, 0.50);
            println!(
                "| same tool as a Node.js subprocess per call, p50 | {} |",
                millis(node_p50)
            );
            println!(
                "| ratio (subprocess p50 / isolated call p50) | {:.0}x |",
                node_p50.as_secs_f64() / p50.as_secs_f64()
            );
        }
        None => println!("| Node.js subprocess | node not found |"),
    }
}
