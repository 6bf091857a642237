use super::*;

fn quotas(text: &str) -> Result<Quotas, String> {
    #[derive(Deserialize)]
    struct File {
        quotas: QuotaConfig,
    }
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    Quotas::new(file.quotas).map_err(|e| e.to_string())
}

#[test]
fn a_named_tenant_has_its_own_limits_and_principals_add_theirs() {
    let quotas = quotas(
        "[quotas.tenant]\ncalls_per_minute = 600\n\
         [quotas.tenants.acme]\ncalls_per_minute = 60\nburst = 5\n\
         [quotas.principals.alice]\nin_flight = 2\n",
    )
    .unwrap();
    assert!(quotas.is_configured());
    let acme = quotas.applied(Some("acme"), Some("alice"));
    assert_eq!(acme.len(), 2);
    // The principal's first: over its own limit, it takes nothing of its tenant's.
    assert_eq!(acme[0].scope, Scope::Principal);
    assert_eq!(acme[0].limits.in_flight, Some(2));
    assert_eq!(
        (acme[1].scope, acme[1].name.as_str()),
        (Scope::Tenant, "acme")
    );
    assert_eq!(acme[1].limits.calls_per_minute, Some(60));
    assert_eq!(acme[0].key, r#"principal:"acme"/"alice""#);
    assert_eq!(acme[1].key, r#"tenant:"acme""#);
    // A principal's counters are its tenant's own, and names cannot forge keys.
    let other = quotas.applied(Some("globex"), Some("alice"));
    assert_ne!(other[0].key, acme[0].key);
    let forged = quotas.applied(Some("acme\"/\"alice"), None);
    assert_ne!(forged[0].key, acme[0].key);
    let globex = quotas.applied(Some("globex"), Some("bob"));
    assert_eq!(globex.len(), 1);
    assert_eq!(globex[0].limits.calls_per_minute, Some(600));
    assert!(quotas.applied(None, None).is_empty());
    assert!(!Quotas::default().is_configured());
}

#[test]
fn bad_limits_are_named() {
    let zero = quotas("[quotas.tenants.acme]\ncalls_per_minute = 0\n").unwrap_err();
    assert!(
        zero.contains("tenants.acme.calls_per_minute must be at least 1"),
        "{zero}"
    );
    let burst = quotas("[quotas.tenant]\nburst = 5\n").unwrap_err();
    assert!(
        burst.contains("tenant.burst needs calls_per_minute"),
        "{burst}"
    );
    let typo = quotas("[quotas.tenant]\ncalls_per_min = 5\n").unwrap_err();
    assert!(typo.contains("unknown field `calls_per_min`"), "{typo}");
    let store = quotas("[quotas]\nstore = \"memcached://u:secret@host\"\n").unwrap_err();
    assert!(
        store.contains("redis://") && !store.contains("secret"),
        "{store}"
    );
}

#[tokio::test]
async fn a_bucket_gives_its_burst_then_one_call_per_refill() {
    let store = MemoryQuotaStore::default();
    for _ in 0..3 {
        assert_eq!(store.take("t:acme", 60, 3).await.unwrap(), None);
    }
    let wait = store.take("t:acme", 60, 3).await.unwrap().expect("empty");
    assert!(
        wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
        "{wait:?}"
    );
    // Another key has its own bucket.
    assert_eq!(store.take("t:globex", 60, 3).await.unwrap(), None);
    tokio::time::sleep(Duration::from_millis(1050)).await;
    assert_eq!(store.take("t:acme", 60, 3).await.unwrap(), None);
    assert!(store.take("t:acme", 60, 3).await.unwrap().is_some());
}

#[tokio::test]
async fn places_are_held_until_released_or_their_lease_ends() {
    let store = MemoryQuotaStore::default();
    let lease = Duration::from_secs(60);
    assert!(store.hold("t:acme", "a", 2, lease).await.unwrap());
    assert!(store.hold("t:acme", "b", 2, lease).await.unwrap());
    assert!(!store.hold("t:acme", "c", 2, lease).await.unwrap());
    store.release("t:acme", "a").await.unwrap();
    assert!(store.hold("t:acme", "c", 2, lease).await.unwrap());
    assert!(
        store
            .hold("t:x", "d", 1, Duration::from_millis(20))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(store.hold("t:x", "e", 1, lease).await.unwrap());
}

#[tokio::test]
async fn fuel_adds_up_within_the_hour() {
    let store = MemoryQuotaStore::default();
    assert_eq!(store.fuel_spent("t:acme").await.unwrap(), 0);
    store.charge_fuel("t:acme", 5).await.unwrap();
    store.charge_fuel("t:acme", 7).await.unwrap();
    assert_eq!(store.fuel_spent("t:acme").await.unwrap(), 12);
    assert_eq!(store.fuel_spent("t:globex").await.unwrap(), 0);
    let (_, left) = clock_hour();
    assert!(left <= Duration::from_secs(3600));
}
