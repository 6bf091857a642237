//! Text a tool chose, made safe for logs, stderr and terminals: every control
//! character (C0, DEL, C1) and every bidirectional-override character is
//! written as a visible escape, so a tool can neither start a fake log line
//! nor send a terminal escape sequence. Values under keys that look like
//! secrets are redacted ([`redact`]) wherever arguments are shown or recorded.

use std::borrow::Cow;
use std::fmt::Write;

use serde_json::Value;

/// Escapes every control character, newlines and tabs included: for text
/// that must stay on one line (a log line, an error message).
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Escapes every control character but newlines and tabs: for multi-line
/// text shown on a terminal.
pub fn multi_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn needs_escape(c: char, keep_lines: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_lines,
        // Bidirectional overrides and isolates reorder what a reader sees.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        c => c.is_control(),
    }
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c, keep_lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !needs_escape(c, keep_lines) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// What stands in for a redacted value.
pub const REDACTED: &str = "[redacted]";

/// Parts of object keys whose values are never written (compared without
/// case, `-` and `_`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
    "cookie",
    "accesskey",
];

/// Replaces, at any depth, the values under keys that look like secrets.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if looks_secret(key) {
                    *value = Value::String(REDACTED.into());
                } else {
                    redact(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

fn looks_secret(key: &str) -> bool {
    let key: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_KEYS.iter().any(|part| key.contains(part))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn forged_log_lines_and_terminal_escapes_become_visible() {
        assert_eq!(
            one_line("ok\n2026-01-01 INFO fake\r\x1b[2J\u{7f}\u{9b}"),
            "ok\\n2026-01-01 INFO fake\\r\\u{1b}[2J\\u{7f}\\u{9b}"
        );
        assert_eq!(multi_line("a\n\tb\x1b]0;t\x07"), "a\n\tb\\u{1b}]0;t\\u{7}");
        assert_eq!(one_line("abc\u{202e}def"), "abc\\u{202e}def");
    }

    #[test]
    fn clean_text_is_not_copied() {
        assert!(matches!(one_line("plain text, ünïcode"), Cow::Borrowed(_)));
        assert!(matches!(multi_line("two\nlines"), Cow::Borrowed(_)));
    }

    #[test]
    fn values_under_secret_looking_keys_are_redacted_at_any_depth() {
        let mut value = json!({
            "query": "rust",
            "api_key": "sk-1",
            "nested": [{"Authorization": "Bearer x", "author": "me"}],
            "DB-Password": {"inner": "p"},
            "session_token": 7,
        });
        redact(&mut value);
        assert_eq!(
            value,
            json!({
                "query": "rust",
                "api_key": REDACTED,
                "nested": [{"Authorization": REDACTED, "author": "me"}],
                "DB-Password": REDACTED,
                "session_token": REDACTED,
            })
        );
    }
}
