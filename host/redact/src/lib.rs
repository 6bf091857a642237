//! Secrets kept out of every record, log line, error message and span:
//!
//! - [`value`]: JSON with the values under secret-looking keys
//!   ([`secret_key`]) replaced, and credentials inside strings too;
//! - [`text`]: free text with credentials by shape replaced (bearer and
//!   basic credentials, JWTs, PEM private keys, well-known API key formats,
//!   passwords in URLs);
//! - [`url`]: a URL without user information, query or fragment.
//!
//! What stands in for a secret is [`REDACTED`].

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

mod keys;

pub use keys::secret_key;

/// What stands in for a redacted value.
pub const REDACTED: &str = "[redacted]";

/// Credentials recognised by their shape alone, wherever they appear.
static SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // An HTTP credential: `Bearer TOKEN`, `Basic BASE64`.
        r"(?i:\b(?:bearer|basic)\s+[A-Za-z0-9._~+/-]{8,}=*)",
        // A JWT (JWS compact form): two base64url JSON objects and a signature.
        r"|\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
        // A PEM private key, to its end line (or the end of the text).
        r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        // OpenAI and Anthropic keys.
        r"|\bsk-[A-Za-z0-9_-]{20,}",
        // GitHub tokens.
        r"|\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        // AWS access key ids.
        r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        // Slack, Google, GitLab, Stripe, Hugging Face and npm tokens.
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}",
        r"|\bAIza[0-9A-Za-z_-]{35}",
        r"|\bglpat-[A-Za-z0-9_-]{20,}",
        r"|\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"|\bhf_[A-Za-z0-9]{30,}",
        r"|\bnpm_[A-Za-z0-9]{36}\b",
        // Telegram bot tokens and Slack webhook paths.
        r"|\bbot\d{6,}:[A-Za-z0-9_-]{30,}",
        r"|/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}",
    ))
    .expect("the credential shapes are a valid expression")
});

/// A password in a URL's user information: `scheme://user:password@`.
static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    // To the last `@` before the path: a password may hold `@`.
    Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s]*@")
        .expect("the URL password shape is a valid expression")
});

/// A `name=value` pair: a URL's query or fragment parameter, a form body,
/// a connection string's `password=...`.
static QUERY_PARAMETER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(^|[?&;#\s,(])([A-Za-z0-9_.\-\[\]]+)=([^&#\s\x22';]*)")
        .expect("the query parameter shape is a valid expression")
});

/// A JSON member inside text (JSON in a string): `"name": "value"`.
static JSON_MEMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"("([A-Za-z0-9_.\-]+)\\?"\s*:\s*\\?")((?:[^"\\]|\\[^"])*)"#)
        .expect("the JSON member shape is a valid expression")
});

/// `text` with every credential recognised by shape replaced by
/// [`REDACTED`] (and the values of secret-looking query parameters, as in
/// `?api_key=…`); borrowed when there is none.
pub fn text(text: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(text);
    if let Cow::Owned(owned) = SHAPES.replace_all(&text, REDACTED) {
        text = Cow::Owned(owned);
    }
    let password = |c: &regex::Captures| format!("{}{REDACTED}@", &c[1]);
    if let Cow::Owned(owned) = URL_PASSWORD.replace_all(&text, password) {
        text = Cow::Owned(owned);
    }
    if text.contains(':') && text.contains('"') {
        let member = |c: &regex::Captures| match secret_key(&c[2]) && !c[3].is_empty() {
            true => format!("{}{REDACTED}", &c[1]),
            false => c[0].to_string(),
        };
        if let Cow::Owned(owned) = JSON_MEMBER.replace_all(&text, member)
            && owned != *text
        {
            text = Cow::Owned(owned);
        }
    }
    if text.contains('=') {
        let parameter = |c: &regex::Captures| match secret_key(&c[2]) && !c[3].is_empty() {
            true => format!("{}{}={REDACTED}", &c[1], &c[2]),
            false => c[0].to_string(),
        };
        if let Cow::Owned(owned) = QUERY_PARAMETER.replace_all(&text, parameter)
            && owned != *text
        {
            text = Cow::Owned(owned);
        }
    }
    text
}

/// Replaces, at any depth, the values under keys that look like secrets
/// ([`secret_key`]), and credentials by shape inside strings ([`text`]).
pub fn value(value: &mut Value) {
    match value {
        Value::Object(map) => {
            // A header or setting as a pair: {"name": "Authorization", "value": "..."}.
            let named_secret = ["name", "key", "header"].iter().any(|field| {
                map.get(*field)
                    .and_then(Value::as_str)
                    .is_some_and(secret_key)
            });
            if named_secret && let Some(value) = map.get_mut("value") {
                *value = Value::String(REDACTED.into());
            }
            for (key, value) in map.iter_mut() {
                if secret_key(key) {
                    *value = Value::String(REDACTED.into());
                } else {
                    self::value(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(self::value),
        Value::String(string) => {
            if let Cow::Owned(redacted) = self::text(string) {
                *string = redacted;
            }
        }
        _ => {}
    }
}

/// A URL as it may be shown or recorded: no user information, no query, no
/// fragment (where credentials and signed links travel). Text that does
/// not parse as a URL is shown with credentials by shape redacted.
pub fn url(text: &str) -> Cow<'_, str> {
    let Ok(mut parsed) = url::Url::parse(text) else {
        return self::text(text);
    };
    let clean = parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.query().is_none()
        && parsed.fragment().is_none();
    if clean {
        return self::text(text);
    }
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    Cow::Owned(self::text(parsed.as_str()).into_owned())
}

#[cfg(test)]
mod tests;
