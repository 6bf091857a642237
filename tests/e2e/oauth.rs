//! `serve --auth-issuer`: the server as an OAuth 2.1 resource server. A test
//! issuer on loopback (its metadata and key set served by a real HTTP
//! server) signs tokens with keys made by `openssl`; the server accepts good
//! tokens, refuses expired, wrong-audience, wrong-key and shared-secret ones
//! with the challenge the MCP spec asks for, and follows a key rotation.

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

/// A test issuer: its metadata, and the key set `keys` holds now.
async fn issuer(keys: Arc<Mutex<Vec<Jwk>>>) -> ProviderServer {
    let base = Arc::new(Mutex::new(String::new()));
    let seen = base.clone();
    let server = ProviderServer::with(move |request, _| {
        let base = seen.lock().unwrap().clone();
        match request.path.as_str() {
            "/.well-known/oauth-authorization-server" => {
                Reply::Json(json!({"issuer": base, "jwks_uri": format!("{base}/keys")}))
            }
            "/keys" => Reply::Json(
                serde_json::to_value(JwkSet {
                    keys: keys.lock().unwrap().clone(),
                })
                .unwrap(),
            ),
            _ => Reply::Error {
                status: 404,
                retry_after: None,
                body: json!({}),
            },
        }
    })
    .await;
    *base.lock().unwrap() = server.url();
    server
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
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&[
        "--tools",
        &fixture,
        "--auth-issuer",
        &iss,
        "--auth-audience",
        AUDIENCE,
        "--auth-tenant-claim",
        "org",
        "--auth-scope",
        "tools",
    ]);
    let good =
        json!({"iss": iss, "aud": AUDIENCE, "sub": "alice", "org": "acme", "exp": now() + 300});

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
    // `sub` is the principal, the `org` claim the tenant, as the tools see them.
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
        (&json!("alice"), &json!("acme"))
    );

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

#[test]
fn an_issuer_that_cannot_be_reached_stops_the_server_with_its_url() {
    let fixture = path(&component("fixture_tool"));
    let output = crate::common::run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--tools",
        &fixture,
        "--auth-issuer",
        "http://127.0.0.1:1",
        "--auth-audience",
        AUDIENCE,
    ]);
    crate::common::assert_clean_failure(
        &output,
        2,
        "cannot fetch the issuer's metadata from http://127.0.0.1:1",
    );
}
