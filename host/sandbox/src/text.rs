//! Text a tool chose, made safe for logs, stderr and terminals: every control
//! character (C0, DEL, C1) and every bidirectional-override character is
//! written as a visible escape, so a tool can neither start a fake log line
//! nor send a terminal escape sequence. Secrets (values under keys that look
//! like secrets, credentials by shape) are redacted ([`redact`],
//! [`tool_line`]) wherever arguments or a tool's text are shown or recorded.

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

pub use wasm_agent_redact::REDACTED;

/// Replaces, at any depth, the values under keys that look like secrets and
/// credentials by shape inside strings (see [`wasm_agent_redact`]).
pub fn redact(value: &mut Value) {
    wasm_agent_redact::value(value);
}

/// One line of a tool's own text (a log line, its stderr) as it may be
/// logged: credentials by shape redacted, control characters escaped.
pub fn tool_line(text: &str) -> String {
    one_line(&wasm_agent_redact::text(text)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
