//! `make bench`, past one machine: session-state get/set latency in every
//! store (memory, SQLite, PostgreSQL), result-cache get/put (memory, Redis),
//! and MCP calls/s through HAProxy (`deploy/haproxy.cfg`) to one replica and
//! to two, side by side in one run. PostgreSQL, Redis and HAProxy are real
//! servers on 127.0.0.1 (`tests/install-servers.sh`).

#[path = "../../../tests/support/postgres.rs"]
mod postgres;
#[path = "../../../tests/support/redis.rs"]
mod redis;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use wasm_agent::cache::{CacheKey, MemoryCache, RedisCache, ResultCache};
use wasm_agent::session::{
    InMemorySessionStore, Owner, PostgresSessionStore, SessionStore, SqliteSessionStore, StateScope,
};

const OPERATIONS: usize = 2000;
const IN_FLIGHT: usize = 16;
const LOAD_TIME: Duration = Duration::from_secs(4);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(what: &str, mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    let p50 = percentile(&latencies, 0.5);
    println!(
        "  {what:<28} p50 {:>8.1} µs   p99 {:>8.1} µs",
        p50.as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6
    );
    p50
}

async fn timed<F: std::future::Future>(run: impl Fn(usize) -> F) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(OPERATIONS);
    for i in 0..OPERATIONS + OPERATIONS / 10 {
        let started = Instant::now();
        run(i).await;
        if i >= OPERATIONS / 10 {
            latencies.push(started.elapsed());
        }
    }
    latencies
}

async fn stores(postgres_url: &str) {
    println!("Session state, {OPERATIONS} sequential operations each (100-byte values):");
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<(&str, Arc<dyn SessionStore>)> = vec![
        ("memory", Arc::new(InMemorySessionStore::default())),
        (
            "sqlite",
            Arc::new(SqliteSessionStore::open(dir.path().join("s.db")).unwrap()),
        ),
        (
            "postgres",
            Arc::new(PostgresSessionStore::connect(postgres_url).await.unwrap()),
        ),
    ];
    let value = format!("\"{}\"", "x".repeat(98));
    let mut p50s = Vec::new();
    for (name, store) in &stores {
        let scope = StateScope {
            owner: Owner::new(Some("bench"), Some("bench")),
            session: "bench".into(),
            component: Arc::from("alias:bench"),
        };
        // Within the 1024-key quota: keys are reused.
        let key = |i: usize| format!("k{}", i % 512);
        let set = timed(|i| {
            let (store, scope, value, key) = (store.clone(), scope.clone(), value.clone(), key(i));
            async move { store.set(&scope, &key, value).await.unwrap() }
        })
        .await;
        let get = timed(|i| {
            let (store, scope, key) = (store.clone(), scope.clone(), key(i));
            async move { assert!(store.get(&scope, &key).await.unwrap().is_some()) }
        })
        .await;
        p50s.push((
            *name,
            report(&format!("{name} set"), set),
            report(&format!("{name} get"), get),
        ));
    }
    let (_, memory_set, memory_get) = p50s[0];
    for (name, set, get) in &p50s[1..] {
        println!(
            "  {name}: set {:.0}x, get {:.0}x the in-memory store's p50",
            set.as_secs_f64() / memory_set.as_secs_f64(),
            get.as_secs_f64() / memory_get.as_secs_f64()
        );
    }
}

async fn caches(redis_url: &str) {
    println!("Result cache, {OPERATIONS} sequential operations each (1 KiB values):");
    let caches: Vec<(&str, Arc<dyn ResultCache>)> = vec![
        ("memory", Arc::new(MemoryCache::new(4096))),
        ("redis", Arc::new(RedisCache::open(redis_url).unwrap())),
    ];
    let value = vec![7u8; 1024];
    for (name, cache) in &caches {
        let key = |i: usize| {
            CacheKey::new(
                "bench",
                "sha256:00",
                &json!({"i": i % 512}),
                Some("t"),
                None,
            )
        };
        let put = timed(|i| {
            let (cache, key, value) = (cache.clone(), key(i), value.clone());
            async move {
                cache
                    .put(&key, &value, Duration::from_secs(60))
                    .await
                    .unwrap()
            }
        })
        .await;
        let get = timed(|i| {
            let (cache, key) = (cache.clone(), key(i));
            async move { assert!(cache.get(&key).await.unwrap().is_some()) }
        })
        .await;
        report(&format!("{name} put"), put);
        report(&format!("{name} get"), get);
    }
}

/// `wasm-agent serve --http 127.0.0.1:0` on the shared store; its MCP URL.
fn replica(postgres_url: &str) -> (Child, String) {
    let tool = root().join("target/wasm32-wasip2/release/echo_tool.wasm");
    assert!(
        tool.is_file(),
        "{} is missing: run `make setup`",
        tool.display()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasm-agent"))
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            postgres_url,
            "--tools",
        ])
        .arg(tool)
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasm-agent serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("wasm-agent: serving MCP on ") {
                let _ = tx.send(url.to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the replica prints its URL");
    (child, url)
}

fn authority(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string()
}

/// HAProxy with the example config in front of `backends` (one may be named
/// twice: one replica behind the balancer).
fn haproxy(backends: [&str; 2]) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(root().join("deploy/haproxy.cfg"))
        .env("WASM_AGENT_LB_BIND", format!("127.0.0.1:{port}"))
        .env("WASM_AGENT_CHECK_INTERVAL", "500ms")
        .env("WASM_AGENT_REPLICA_1", backends[0])
        .env("WASM_AGENT_REPLICA_2", backends[1])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (tests/install-servers.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "haproxy did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// Sessionless (2026-07-28) `tools/call`s of `echo` at `url`, `IN_FLIGHT` at
/// a time for `LOAD_TIME`; calls per second.
async fn calls_per_second(url: &str) -> f64 {
    let client = reqwest::Client::new();
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}}
    })
    .to_string();
    let target = url.to_string();
    let call = move || {
        client
            .post(&target)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .body(body.clone())
            .send()
    };
    // Warm up (and wait for the balancer's first checks).
    let ready = Instant::now() + Duration::from_secs(10);
    loop {
        match call().await {
            Ok(response) if response.status() == 200 => break,
            _ => assert!(Instant::now() < ready, "{url} never answered"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (done, call) = (done.clone(), call.clone());
            tokio::spawn(async move {
                while started.elapsed() < LOAD_TIME {
                    let response = call().await.expect("answered");
                    let text = response.text().await.unwrap();
                    assert!(text.contains("\"isError\":false"), "{text}");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

async fn replicas(postgres_url: &str) {
    println!(
        "MCP tools/call over HTTP (sessionless), {IN_FLIGHT} in flight for {} s, \
         replicas on one PostgreSQL, this machine's cores shared by all:",
        LOAD_TIME.as_secs()
    );
    let (mut first, first_url) = replica(postgres_url);
    let (mut second, second_url) = replica(postgres_url);
    let (a, b) = (authority(&first_url), authority(&second_url));
    let direct = calls_per_second(&first_url).await;
    let (mut one_lb, one_url) = haproxy([&a, &a]);
    let one = calls_per_second(&one_url).await;
    let (mut two_lb, two_url) = haproxy([&a, &b]);
    let two = calls_per_second(&two_url).await;
    println!("  one replica, direct          {direct:>8.0} calls/s");
    println!("  HAProxy -> one replica       {one:>8.0} calls/s");
    println!("  HAProxy -> two replicas      {two:>8.0} calls/s");
    println!(
        "  two replicas / one: {:.2}x; HAProxy costs {:.0}% of direct",
        two / one,
        (1.0 - one / direct) * 100.0
    );
    for child in [&mut one_lb, &mut two_lb, &mut first, &mut second] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cluster = postgres::Postgres::start();
    let redis = redis::Redis::start();
    runtime.block_on(async {
        stores(&cluster.url()).await;
        caches(&redis.url()).await;
        replicas(&cluster.url()).await;
    });
}
