//! The Redis cache against a real `redis-server` on 127.0.0.1.

#[path = "../../../tests/support/redis.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use redis_server::Redis;
use serde_json::json;
use wasm_agent_cache::{CacheError, CacheKey, ResultCache, conformance};
use wasm_agent_cache_redis::RedisCache;

const MINUTE: Duration = Duration::from_secs(60);

fn key(tool: &str, tenant: Option<&str>) -> CacheKey {
    CacheKey::new(tool, "sha256:ab", &json!({"q": 1}), tenant, None)
}

#[tokio::test]
async fn the_redis_cache_conforms() {
    let redis = Redis::start();
    let cache = RedisCache::open(&redis.url()).unwrap();
    conformance::all(&cache).await;
    assert_eq!(cache.location(), redis.url());
}

#[tokio::test]
async fn replicas_share_entries_and_namespaces_keep_apart() {
    let redis = Redis::start();
    let one = RedisCache::open(&redis.url())
        .unwrap()
        .with_namespace("svc");
    let two = RedisCache::open(&redis.url())
        .unwrap()
        .with_namespace("svc");
    let other = RedisCache::open(&redis.url())
        .unwrap()
        .with_namespace("elsewhere");
    one.put(&key("t", Some("acme")), b"42", MINUTE)
        .await
        .unwrap();
    assert_eq!(
        two.get(&key("t", Some("acme"))).await.unwrap(),
        Some(b"42".to_vec())
    );
    assert_eq!(other.get(&key("t", Some("acme"))).await.unwrap(), None);

    other
        .put(&key("t", Some("acme")), b"kept", MINUTE)
        .await
        .unwrap();
    two.clear().await.unwrap();
    assert_eq!(one.get(&key("t", Some("acme"))).await.unwrap(), None);
    assert_eq!(
        other.get(&key("t", Some("acme"))).await.unwrap(),
        Some(b"kept".to_vec())
    );
}

#[tokio::test]
async fn expiry_is_redis_own_and_a_foreign_entry_is_a_miss() {
    let redis = Redis::start();
    let cache = RedisCache::open(&redis.url()).unwrap().with_namespace("n");
    let key = key("t", None);
    cache
        .put(&key, b"v", Duration::from_secs(30))
        .await
        .unwrap();
    let name = format!("wasm-agent:result:v1:n:{}", key.digest());
    let left: u64 = redis.command(&["PTTL", &name]).unwrap()[1..]
        .parse()
        .unwrap();
    assert!((29_000..=30_000).contains(&left), "PTTL {left}");

    // Something else written under the same name (a collision, or a
    // tampered entry) does not answer for the key.
    assert_eq!(
        redis
            .command(&["SET", &name, "\u{3}\0\0\0abcvalue"])
            .unwrap(),
        "+OK"
    );
    assert_eq!(cache.get(&key).await.unwrap(), None);
    assert_eq!(redis.command(&["SET", &name, "x"]).unwrap(), "+OK");
    assert_eq!(cache.get(&key).await.unwrap(), None);
}

#[tokio::test]
async fn oversized_values_are_not_kept() {
    let redis = Redis::start();
    let cache = RedisCache::open(&redis.url()).unwrap().with_max_value(8);
    let refused = cache.put(&key("t", None), &[1; 9], MINUTE).await;
    assert!(matches!(
        refused,
        Err(CacheError::TooLarge { size: 9, max: 8 })
    ));
    cache.put(&key("t", None), &[1; 8], MINUTE).await.unwrap();
}

#[tokio::test]
async fn a_stopped_redis_is_unavailable_quickly_then_used_again() {
    let redis = Redis::start();
    let cache = RedisCache::open(&redis.url()).unwrap();
    cache.put(&key("t", None), b"v", MINUTE).await.unwrap();
    redis.stop();

    let started = Instant::now();
    let failed = cache.get(&key("t", None)).await;
    assert!(
        matches!(failed, Err(CacheError::Unavailable { .. })),
        "{failed:?}"
    );
    // Within the command bound (250 ms) plus scheduling, not a hang.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Skipped at once while it is out.
    let skipped = Instant::now();
    let err = cache.put(&key("t", None), b"w", MINUTE).await.unwrap_err();
    assert!(err.to_string().contains("skipped"), "{err}");
    assert!(skipped.elapsed() < Duration::from_millis(50));

    redis.resume();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cache.put(&key("t", None), b"back", MINUTE).await {
            Ok(()) => break,
            Err(e) => assert!(Instant::now() < deadline, "never came back: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        cache.get(&key("t", None)).await.unwrap(),
        Some(b"back".to_vec())
    );
}

#[tokio::test]
async fn a_redis_that_never_answers_is_bounded() {
    // Accepts connections and reads, never writes: a stalled server.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let cache = RedisCache::open(&format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = cache.get(&key("t", None)).await.unwrap_err();
    assert!(err.to_string().contains("unavailable"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
