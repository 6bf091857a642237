use serde_json::json;

use super::*;

#[test]
fn keys_that_name_secrets() {
    for key in [
        "password",
        "DB-Password",
        "user_passcode",
        "pwd",
        "db_pass",
        "x-auth",
        "authHeader",
        "Authorization",
        "bearer",
        "jwt",
        "otp_code",
        "session",
        "session_id",
        "cookie",
        "Set-Cookie",
        "credentials",
        "aws_credential",
        "private_key",
        "privateKey",
        "api_key",
        "apiKey",
        "access_key",
        "client_secret",
        "refresh-token",
        "DBPASS",
        "pw",
        "totp",
        "sig",
    ] {
        assert!(secret_key(key), "{key} is a secret");
    }
    for key in [
        "query",
        "author",
        "bypass",
        "passenger",
        "compass",
        "path",
        "url",
        "city",
        "sessions2",
        "expression",
        "key",
        "monkey",
    ] {
        assert!(!secret_key(key), "{key} is not a secret");
    }
}

#[test]
fn values_under_secret_keys_are_redacted_at_any_depth() {
    let mut value = json!({
        "query": "rust",
        "api_key": "sk-1",
        "nested": [{"Authorization": "Bearer x", "author": "me"}],
        "DB-Password": {"inner": "p"},
        "session_token": 7,
        "otp": "123456",
    });
    super::value(&mut value);
    let mut pairs = json!({"headers": [{"name": "Authorization", "value": "Token abc"},
        {"name": "Accept", "value": "text/plain"}]});
    super::value(&mut pairs);
    assert_eq!(pairs["headers"][0]["value"], REDACTED);
    assert_eq!(pairs["headers"][1]["value"], "text/plain");
    assert_eq!(
        value,
        json!({
            "query": "rust",
            "api_key": REDACTED,
            "nested": [{"Authorization": REDACTED, "author": "me"}],
            "DB-Password": REDACTED,
            "session_token": REDACTED,
            "otp": REDACTED,
        })
    );
}

#[test]
fn credentials_by_shape_are_redacted_wherever_they_appear() {
    let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz";
    let pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----";
    for (secret, kind) in [
        ("Bearer abcdefgh12345678", "bearer"),
        ("authorization: basic dXNlcjpwYXNzd29yZA==", "basic"),
        (jwt, "JWT"),
        (pem, "PEM"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE (cut)", "cut PEM"),
        ("sk-proj-abcdefghijklmnopqrstuvwx", "OpenAI"),
        ("sk-ant-api03-abcdefghijklmnopqrstu", "Anthropic"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub"),
        (
            "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz",
            "GitHub PAT",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "AWS"),
        ("xoxb-1234567890-abcdefghij", "Slack"),
        ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "Google"),
        ("glpat-abcdefghijklmnopqrst", "GitLab"),
        ("sk_live_abcdefghijklmnop1234", "Stripe"),
        ("hf_abcdefghijklmnopqrstuvwxyz01234567", "Hugging Face"),
    ] {
        let line = format!("the tool got {secret} from the vault");
        let shown = text(&line);
        assert!(
            !shown.contains(&secret[secret.len() - 6..]),
            "{kind}: {shown}"
        );
        assert!(shown.contains(REDACTED), "{kind}: {shown}");
        assert!(shown.starts_with("the tool got "), "{kind}: {shown}");
        let mut value = json!({"note": line});
        super::value(&mut value);
        assert!(value["note"].as_str().unwrap().contains(REDACTED), "{kind}");
    }
    assert_eq!(
        text("postgres://app:hunter2@db.internal:5432/app"),
        "postgres://[redacted]@db.internal:5432/app"
    );
    assert_eq!(
        text("postgres://app:p@ss@db/x"),
        "postgres://[redacted]@db/x"
    );
    assert_eq!(
        text("host=db user=app password=hunter2 sslmode=require"),
        "host=db user=app password=[redacted] sslmode=require"
    );
    assert_eq!(text("password=x&user=y"), "password=[redacted]&user=y");
    assert_eq!(
        text("https://app.example/cb#access_token=abc&state=1"),
        "https://app.example/cb#access_token=[redacted]&state=1"
    );
    assert_eq!(
        text(r#"{"password":"hunter2","user":"app"}"#),
        r#"{"password":"[redacted]","user":"app"}"#
    );
    assert_eq!(
        text(r#"body {\"token\": \"abc\"}"#),
        r#"body {\"token\": \"[redacted]\"}"#
    );
    assert!(
        text("POST /bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage")
            .contains(REDACTED)
    );
    assert!(text("/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX").contains(REDACTED));
    assert_eq!(
        text("GET https://api.example.com/v1?q=rust&api_key=abc123&X-Amz-Signature=f00d#top"),
        "GET https://api.example.com/v1?q=rust&api_key=[redacted]&X-Amz-Signature=[redacted]#top"
    );
    for plain in [
        "a bearer of good news",
        "sk-short",
        "the basics of rust",
        "https://example.com/a?b=c&page=2",
        "eyJ alone",
    ] {
        assert!(matches!(text(plain), Cow::Borrowed(_)), "{plain}");
    }
}

#[test]
fn urls_lose_user_information_query_and_fragment() {
    assert_eq!(
        url("https://user:pw@api.example.com:8443/v1/items?key=abc&sig=xyz#frag"),
        "https://api.example.com:8443/v1/items"
    );
    assert_eq!(
        url("https://api.example.com/v1"),
        "https://api.example.com/v1"
    );
    assert!(matches!(
        url("https://api.example.com/v1"),
        Cow::Borrowed(_)
    ));
    // Not a URL: still no credentials by shape.
    assert_eq!(
        url("host:443 Bearer abcdefgh12345678"),
        format!("host:443 {REDACTED}")
    );
}
