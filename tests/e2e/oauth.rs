//! `serve --auth-issuer`: the server as an OAuth 2.1 resource server. A test
//! issuer on loopback (its metadata and key set served by a real HTTP
//! server) signs tokens with keys made by `openssl`; the server accepts good
//! tokens, refuses expired, wrong-audience, wrong-key and shared-secret ones
//! with the challenge the MCP spec asks for, and follows a key rotation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{component, temp_dir};
use crate::mcp::{Server, initialize, path};
use crate::provider_server::{ProviderServer, Reply};

const AUDIENCE: &str = "https://tools.example.com/mcp";

/// A P-256 key made by openssl, as a signing key.
fn new_key(dir: &std::path::Path, name: &str) -> EncodingKey {
    let file = dir.join(format!("{name}.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&file)
        .status()
        .expect("openssl runs");
    assert!(status.success());
    EncodingKey::from_ec_pem(&std::fs::read(&file).unwrap()).unwrap()
}

fn public(key: &EncodingKey, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some(kid.to_string());
    jwk
}

/// What a test issuer serves: the key set `keys` holds now, metadata that
/// may name another issuer or key-set URL, and keys that may be down.
#[derive(Clone, Default)]
struct Issuer {
    keys: Arc<Mutex<Vec<Jwk>>>,
    claims_issuer: Arc<Mutex<Option<String>>>,
    jwks_uri: Arc<Mutex<Option<String>>>,
    keys_down: Arc<AtomicBool>,
}

impl Issuer {
    fn with_keys(keys: Vec<Jwk>) -> Self {
        let issuer = Self::default();
        *issuer.keys.lock().unwrap() = keys;
        issuer
    }

    async fn serve(&self) -> ProviderServer {
        let base = Arc::new(Mutex::new(String::new()));
        let (seen, this) = (base.clone(), self.clone());
        let server = ProviderServer::with(move |request, _| {
            let base = seen.lock().unwrap().clone();
            match request.path.as_str() {
                "/.well-known/oauth-authorization-server" => Reply::Json(json!({
                    "issuer": this.claims_issuer.lock().unwrap().clone().unwrap_or(base.clone()),
                    "jwks_uri": this.jwks_uri.lock().unwrap().clone()
                        .unwrap_or(format!("{base}/keys")),
                })),
                "/keys" if !this.keys_down.load(Ordering::SeqCst) => Reply::Json(
                    serde_json::to_value(JwkSet {
                        keys: this.keys.lock().unwrap().clone(),
                    })
                    .unwrap(),
                ),
                _ => Reply::Error {
                    status: if request.path == "/keys" { 503 } else { 404 },
                    retry_after: None,
                    body: json!({}),
                },
            }
        })
        .await;
        *base.lock().unwrap() = server.url();
        server
    }
}

async fn issuer(keys: Arc<Mutex<Vec<Jwk>>>) -> ProviderServer {
    Issuer {
        keys,
        ..Issuer::default()
    }
    .serve()
    .await
}

fn token(key: &EncodingKey, kid: &str, claims: Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_string());
    encode(&header, &claims, key).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn initialize_with(server: &Server, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(server.at("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_jwts_are_checked_against_the_issuers_keys() {
    let dir = temp_dir();
    let (signing, other) = (new_key(dir.path(), "a"), new_key(dir.path(), "b"));
    let keys = Arc::new(Mutex::new(vec![public(&signing, "k1")]));
    let issuer = issuer(keys.clone()).await;
    let iss = issuer.url();
    let server = serve_for(
        &iss,
        &["--auth-tenant-claim", "org", "--auth-scope", "tools"],
    );
    let good = json!({"iss": iss, "aud": AUDIENCE, "sub": "alice", "org": "acme",
        "scope": "openid tools", "exp": now() + 300});

    // The metadata clients discover the issuer from (RFC 9728).
    let metadata: Value = reqwest::get(server.at("/.well-known/oauth-protected-resource"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], AUDIENCE);
    assert_eq!(metadata["authorization_servers"], json!([iss]));
    assert_eq!(metadata["scopes_supported"], json!(["tools"]));

    let missing = initialize_with(&server, None).await;
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        missing.headers()["www-authenticate"],
        "Bearer resource_metadata=\"https://tools.example.com/.well-known/oauth-protected-resource\", scope=\"tools\""
    );

    let alice = token(&signing, "k1", good.clone());
    let accepted = initialize_with(&server, Some(&alice)).await;
    assert_eq!(accepted.status(), StatusCode::OK);
    // `oauth:` and `sub` is the principal, the `org` claim the tenant, as the tools see them.
    let session = accepted.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "context", "arguments": {}}});
    let answer: Value = reqwest::Client::new()
        .post(server.at("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .bearer_auth(&alice)
        .json(&call)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let context: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (&context["user_id"], &context["tenant_id"]),
        (&json!("oauth:alice"), &json!("acme"))
    );

    // The scope --auth-scope names is enforced, not only advertised: a good
    // token without it is forbidden with the RFC 6750 challenge; `scp`
    // (a list) grants it as `scope` does.
    for (what, scopes) in [
        ("no scope claim", json!(null)),
        ("other scopes", json!("openid toolsmith")),
        ("a list without it", json!(["openid"])),
    ] {
        let mut claims = good.clone();
        claims["scope"] = scopes;
        let refused = initialize_with(&server, Some(&token(&signing, "k1", claims))).await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{what}");
        assert_eq!(
            refused.headers()["www-authenticate"],
            "Bearer resource_metadata=\"https://tools.example.com/.well-known/oauth-protected-resource\", \
             scope=\"tools\", error=\"insufficient_scope\"",
            "{what}"
        );
    }
    let mut listed = good.clone();
    listed.as_object_mut().unwrap().remove("scope");
    listed["scp"] = json!(["tools"]);
    let accepted = initialize_with(&server, Some(&token(&signing, "k1", listed))).await;
    assert_eq!(accepted.status(), StatusCode::OK);

    let mut expired = good.clone();
    expired["exp"] = json!(now() - 120);
    let mut not_yet = good.clone();
    not_yet["nbf"] = json!(now() + 300);
    let mut from_the_future = good.clone();
    from_the_future["iat"] = json!(now() + 300);
    let mut elsewhere = good.clone();
    elsewhere["aud"] = json!("https://other.example.com/mcp");
    let mut no_tenant = good.clone();
    no_tenant.as_object_mut().unwrap().remove("org");
    let shared_secret = encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"k1").unwrap(),
    )
    .unwrap();
    for (what, bad) in [
        ("expired", token(&signing, "k1", expired)),
        ("not valid before", token(&signing, "k1", not_yet)),
        (
            "issued in the future",
            token(&signing, "k1", from_the_future),
        ),
        ("wrong audience", token(&signing, "k1", elsewhere)),
        ("wrong key", token(&other, "k1", good.clone())),
        ("no tenant claim", token(&signing, "k1", no_tenant)),
        ("HS256", shared_secret),
        ("not a JWT", "s3cret".to_string()),
    ] {
        let refused = initialize_with(&server, Some(&bad)).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{what}");
        let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.ends_with("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
    }

    // The issuer rotates to a new key: tokens naming it are accepted.
    keys.lock().unwrap().push(public(&other, "k2"));
    let rotated = initialize_with(&server, Some(&token(&other, "k2", good))).await;
    assert_eq!(rotated.status(), StatusCode::OK);
}

/// A server taking tokens of `issuer`, with `extra` flags.
fn serve_for(issuer: &str, extra: &[&str]) -> Server {
    let fixture = path(&component("fixture_tool"));
    let mut args = vec!["--tools", &fixture, "--auth-issuer", issuer];
    args.extend(["--auth-audience", AUDIENCE]);
    args.extend(extra);
    Server::start(&args)
}

#[test]
fn an_issuer_that_cannot_be_reached_stops_the_server_with_its_url() {
    refused_at_start(
        "http://127.0.0.1:1",
        "cannot fetch the issuer's metadata from http://127.0.0.1:1",
    );
}

/// Runs `serve` against an issuer expected to be refused at start, with `says` in the error.
fn refused_at_start(issuer: &str, says: &str) {
    let fixture = path(&component("fixture_tool"));
    let output = crate::common::run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--tools",
        &fixture,
        "--auth-issuer",
        issuer,
        "--auth-audience",
        AUDIENCE,
    ]);
    crate::common::assert_clean_failure(&output, 2, says);
}

#[tokio::test(flavor = "multi_thread")]
async fn issuer_and_keys_come_over_https_from_the_issuer_the_metadata_names() {
    // Plain http off this machine carries keys anyone on the path can swap.
    refused_at_start(
        "http://issuer.example.com",
        "the issuer http://issuer.example.com is refused: plain http is accepted only to loopback",
    );
    let dir = temp_dir();
    let key = public(&new_key(dir.path(), "a"), "k1");

    // Metadata that names another issuer is not this issuer's (RFC 8414 3.3).
    let impostor = Issuer::with_keys(vec![key.clone()]);
    *impostor.claims_issuer.lock().unwrap() = Some("https://login.example.com".into());
    let server = impostor.serve().await;
    refused_at_start(
        &server.url(),
        "it names issuer \"https://login.example.com\" where",
    );

    // Keys the metadata places behind plain http off this machine.
    let cleartext = Issuer::with_keys(vec![key]);
    *cleartext.jwks_uri.lock().unwrap() = Some("http://10.255.255.1/keys".into());
    let server = cleartext.serve().await;
    refused_at_start(
        &server.url(),
        "the key set's URL http://10.255.255.1/keys is refused: plain http",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_past_their_age_are_not_used_and_a_failing_issuer_is_not_asked_per_request() {
    let dir = temp_dir();
    let signing = new_key(dir.path(), "a");
    let issuer = Issuer::with_keys(vec![public(&signing, "k1")]);
    let served = issuer.serve().await;
    let iss = served.url();
    let server = serve_for(&iss, &["--auth-keys-max-age", "2s"]);
    let alice = token(
        &signing,
        "k1",
        json!({"iss": iss, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300}),
    );
    assert_eq!(
        initialize_with(&server, Some(&alice)).await.status(),
        StatusCode::OK
    );
    let fetches = || {
        served
            .requests()
            .iter()
            .filter(|r| r.path == "/keys")
            .count()
    };
    assert_eq!(fetches(), 1, "the keys are fetched once at start");

    // The issuer goes down and the keys grow older than their maximum age:
    // tokens are refused, and the issuer is asked once, not per request.
    issuer.keys_down.store(true, Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    for attempt in 0..6 {
        let refused = initialize_with(&server, Some(&alice)).await;
        assert_eq!(
            refused.status(),
            StatusCode::UNAUTHORIZED,
            "attempt {attempt}"
        );
    }
    assert_eq!(fetches(), 2, "one failed refresh, then a pause");

    // Back up: after the pause, the keys are fetched again and the token passes.
    issuer.keys_down.store(false, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if initialize_with(&server, Some(&alice)).await.status() == StatusCode::OK {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the keys come back");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(fetches(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jwt_subject_is_not_the_tokens_file_principal_of_that_name() {
    let dir = temp_dir();
    let signing = new_key(dir.path(), "a");
    let served = issuer(Arc::new(Mutex::new(vec![public(&signing, "k1")]))).await;
    let iss = served.url();
    // "test" is the tokens-file token of principal alice.
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[tokens]]\nsha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n\
         principal = \"alice\"\n",
    )
    .unwrap();
    let server = serve_for(&iss, &["--tokens", &path(&tokens)]);
    let jwt = token(
        &signing,
        "k1",
        json!({"iss": iss, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300}),
    );
    let mut sessions = Vec::new();
    for bearer in ["test", jwt.as_str()] {
        let opened = initialize_with(&server, Some(bearer)).await;
        assert_eq!(opened.status(), StatusCode::OK);
        let session = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        sessions.push((bearer.to_string(), session));
    }
    let call = |bearer: String, session: String| {
        let url = server.at("/mcp");
        async move {
            reqwest::Client::new()
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", session)
                .bearer_auth(bearer)
                .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "context", "arguments": {}}}))
                .send()
                .await
                .unwrap()
        }
    };
    let mut users = Vec::new();
    for (bearer, session) in &sessions {
        let answer: Value = call(bearer.clone(), session.clone())
            .await
            .json()
            .await
            .unwrap();
        let context: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        users.push(context["user_id"].clone());
    }
    assert_eq!(users, [json!("alice"), json!("oauth:alice")]);
    // Neither may use the other's session.
    let (file, issued) = (&sessions[0], &sessions[1]);
    for (bearer, session) in [(&issued.0, &file.1), (&file.0, &issued.1)] {
        let refused = call(bearer.clone(), session.clone()).await;
        assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    }
}
