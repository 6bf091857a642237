//! The quota counters against a real `redis-server` on 127.0.0.1: two
//! stores (two replicas) share one bucket, one set of places and one fuel
//! count, and a Redis that is down is an error, not a pass.

#[path = "../../../tests/support/redis.rs"]
mod redis_server;

use std::time::Duration;

use redis_server::Redis;
use wasm_agent_access::quota::QuotaStore;
use wasm_agent_access_redis::RedisQuotaStore;

#[tokio::test]
async fn two_replicas_share_one_bucket() {
    let redis = Redis::start();
    let one = RedisQuotaStore::open(&redis.url()).unwrap();
    let two = RedisQuotaStore::open(&redis.url()).unwrap();
    // A burst of 4 at 60 a minute, taken from both.
    for store in [&one, &two, &one, &two] {
        assert_eq!(store.take("tenant:acme", 60, 4).await.unwrap(), None);
    }
    let wait = two
        .take("tenant:acme", 60, 4)
        .await
        .unwrap()
        .expect("empty");
    assert!(
        wait <= Duration::from_secs(1) && wait > Duration::from_millis(500),
        "{wait:?}"
    );
    assert!(one.take("tenant:acme", 60, 4).await.unwrap().is_some());
    assert_eq!(one.take("tenant:globex", 60, 4).await.unwrap(), None);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(two.take("tenant:acme", 60, 4).await.unwrap(), None);
}

#[tokio::test]
async fn places_and_fuel_are_shared_and_leases_end() {
    let redis = Redis::start();
    let one = RedisQuotaStore::open(&redis.url()).unwrap();
    let two = RedisQuotaStore::open(&redis.url()).unwrap();
    let lease = Duration::from_secs(60);
    assert!(one.hold("tenant:acme", "r1/c1", 2, lease).await.unwrap());
    assert!(two.hold("tenant:acme", "r2/c1", 2, lease).await.unwrap());
    assert!(!one.hold("tenant:acme", "r1/c2", 2, lease).await.unwrap());
    two.release("tenant:acme", "r2/c1").await.unwrap();
    assert!(one.hold("tenant:acme", "r1/c2", 2, lease).await.unwrap());
    // A replica that died holding a place gives it back when its lease ends.
    let short = Duration::from_millis(50);
    assert!(one.hold("tenant:x", "dead", 1, short).await.unwrap());
    assert!(!two.hold("tenant:x", "alive", 1, lease).await.unwrap());
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(two.hold("tenant:x", "alive", 1, lease).await.unwrap());

    one.charge_fuel("tenant:acme", 1_000).await.unwrap();
    two.charge_fuel("tenant:acme", 234).await.unwrap();
    assert_eq!(one.fuel_spent("tenant:acme").await.unwrap(), 1_234);
    assert_eq!(two.fuel_spent("tenant:globex").await.unwrap(), 0);
}

#[tokio::test]
async fn one_callers_bucket_places_and_fuel_never_meet() {
    let redis = Redis::start();
    let store = RedisQuotaStore::open(&redis.url()).unwrap();
    let lease = Duration::from_secs(60);
    for n in 0..3 {
        assert_eq!(store.take("k", 60, 10).await.unwrap(), None);
        assert!(store.hold("k", &format!("c{n}"), 10, lease).await.unwrap());
        store.charge_fuel("k", 5).await.unwrap();
    }
    assert_eq!(store.fuel_spent("k").await.unwrap(), 15);
    store.release("k", "c0").await.unwrap();
}

#[tokio::test]
async fn a_redis_that_is_down_is_an_error_naming_it() {
    let redis = Redis::start();
    let store = RedisQuotaStore::open(&redis.url()).unwrap();
    assert_eq!(store.take("tenant:acme", 60, 1).await.unwrap(), None);
    redis.stop();
    let error = store.take("tenant:acme", 60, 1).await.unwrap_err();
    assert!(
        error.to_string().contains("the quota store redis://"),
        "{error}"
    );
    let secret = RedisQuotaStore::open("redis://:hunter2@127.0.0.1:1/0").unwrap();
    assert!(
        !secret.location().contains("hunter2"),
        "{}",
        secret.location()
    );
}
