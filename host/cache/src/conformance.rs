//! What every [`ResultCache`] must do, as checks each backend's tests run
//! against a cache of its own (feature `conformance`). Each check files its
//! entries under tools named after `run`, so checks may share one server;
//! [`all`] runs them in one go.

use std::time::Duration;

use serde_json::json;

use crate::{CacheKey, ResultCache};

const MINUTE: Duration = Duration::from_secs(60);

/// Every check, with entries named after `run`.
pub async fn all(cache: &dyn ResultCache) {
    separation(cache, "sep").await;
    expiry(cache, "exp").await;
    overwrite_and_binary(cache, "bin").await;
}

/// A value is found only under exactly its key: another tenant or principal
/// (or none),
/// another component version, tool or argument never sees it.
pub async fn separation(cache: &dyn ResultCache, run: &str) {
    let tool = format!("{run}-tool");
    let args = json!({"q": "x", "n": [1, 2]});
    let mine = CacheKey::new(&tool, "sha256:v1", &args, Some("acme"), Some("ada"));
    cache.put(&mine, b"for acme", MINUTE).await.unwrap();
    let reordered = json!({"n": [1, 2], "q": "x"});
    let same = CacheKey::new(&tool, "sha256:v1", &reordered, Some("acme"), Some("ada"));
    assert_eq!(
        cache.get(&same).await.unwrap().as_deref(),
        Some(&b"for acme"[..])
    );
    for other in [
        CacheKey::new(&tool, "sha256:v1", &args, Some("globex"), Some("ada")),
        CacheKey::new(&tool, "sha256:v1", &args, None, Some("ada")),
        CacheKey::new(&tool, "sha256:v1", &args, Some(""), Some("ada")),
        CacheKey::new(&tool, "sha256:v1", &args, Some("acme"), Some("bob")),
        CacheKey::new(&tool, "sha256:v1", &args, Some("acme"), None),
        CacheKey::new(&tool, "sha256:v2", &args, Some("acme"), Some("ada")),
        CacheKey::new(
            &format!("{run}-other"),
            "sha256:v1",
            &args,
            Some("acme"),
            Some("ada"),
        ),
        CacheKey::new(
            &tool,
            "sha256:v1",
            &json!({"q": "y", "n": [1, 2]}),
            Some("acme"),
            Some("ada"),
        ),
    ] {
        assert_eq!(cache.get(&other).await.unwrap(), None, "{other:?}");
    }
}

/// An entry is gone once its time-to-live has passed, and a zero one keeps
/// nothing.
pub async fn expiry(cache: &dyn ResultCache, run: &str) {
    let brief = CacheKey::new(&format!("{run}-brief"), "v", &json!({}), None, None);
    cache
        .put(&brief, b"soon gone", Duration::from_millis(300))
        .await
        .unwrap();
    assert!(cache.get(&brief).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cache.get(&brief).await.unwrap(), None);

    let never = CacheKey::new(&format!("{run}-zero"), "v", &json!({}), None, None);
    cache.put(&never, b"x", Duration::ZERO).await.unwrap();
    assert_eq!(cache.get(&never).await.unwrap(), None);
}

/// Values are bytes, kept exactly; a second put replaces the first; clear
/// drops everything.
pub async fn overwrite_and_binary(cache: &dyn ResultCache, run: &str) {
    let key = CacheKey::new(
        &format!("{run}-bytes"),
        "v",
        &json!({"a": 1}),
        Some("t"),
        None,
    );
    let bytes: Vec<u8> = (0..=255).collect();
    cache.put(&key, &bytes, MINUTE).await.unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), Some(bytes));
    cache.put(&key, b"", MINUTE).await.unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), Some(Vec::new()));
    cache.clear().await.unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), None);
}
