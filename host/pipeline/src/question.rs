//! What a person is shown of a call that needs approval, and what their
//! answer covers. The summary never lets padding or key order push
//! something out of view unnoticed: short arguments are shown whole; longer
//! ones show every key (each long value cut to its start and end), say that
//! they were cut and where, and give the digest of the exact arguments, the
//! thing an answer "for this session" is remembered for.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use wasm_agent_cache::canonical;
use wasm_agent_sandbox::text;

/// Arguments whose canonical JSON is at most this long are shown whole.
pub const MAX_SUMMARY: usize = 300;
/// A longer string (value or key) shows this many characters of its start
/// and of its end.
const STRING_ENDS: usize = 20;
/// Items of an array shown.
const MAX_ITEMS: usize = 8;
/// Keys of one object shown.
const MAX_KEYS: usize = 32;
/// Objects and arrays nested deeper are shown as `{…}` / `[…]`.
const MAX_DEPTH: usize = 6;
/// The shortened form's own bound.
const MAX_SHOWN: usize = 2000;
/// Places named in the note of what was cut.
const MAX_CUT_NAMED: usize = 12;

/// `sha256:HEX` of the exact arguments in canonical form (keys sorted,
/// nothing redacted): what an approval covers.
pub fn exact(arguments: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical(arguments)))
    )
}

/// The arguments as one line for a person: secrets redacted, control
/// characters escaped; shortened where long, saying so (see the module).
pub fn summary(arguments: &Value) -> String {
    let mut shown = arguments.clone();
    text::redact(&mut shown);
    let whole = canonical(&shown);
    if whole.chars().count() <= MAX_SUMMARY {
        return text::one_line(&whole).into_owned();
    }
    let mut cut = Vec::new();
    let short = shorten(&shown, String::new(), 0, &mut cut);
    let mut line = text::one_line(&canonical(&short)).into_owned();
    if line.chars().count() > MAX_SHOWN {
        line = line.chars().take(MAX_SHOWN).collect();
        line.push('…');
        cut.push("(the rest of the arguments)".into());
    }
    let mut named: Vec<String> = cut
        .iter()
        .take(MAX_CUT_NAMED)
        .map(|place| text::one_line(place).into_owned())
        .collect();
    if cut.len() > MAX_CUT_NAMED {
        named.push(format!("and {} more", cut.len() - MAX_CUT_NAMED));
    }
    format!(
        "{line} [too long to show in full ({} characters); cut at {}; the exact arguments \
         have {}]",
        whole.chars().count(),
        named.join(", "),
        exact(arguments)
    )
}

/// `value` with long strings, long arrays, big objects and deep nesting cut,
/// each cut noted in `cut` by its JSON pointer.
fn shorten(value: &Value, at: String, depth: usize, cut: &mut Vec<String>) -> Value {
    match value {
        Value::String(text) => match cut_string(text) {
            Some(short) => {
                cut.push(pointer_or_root(&at));
                Value::String(short)
            }
            None => value.clone(),
        },
        Value::Array(items) if depth >= MAX_DEPTH && !items.is_empty() => {
            cut.push(pointer_or_root(&at));
            Value::String(format!("[… {} items]", items.len()))
        }
        Value::Object(map) if depth >= MAX_DEPTH && !map.is_empty() => {
            cut.push(pointer_or_root(&at));
            Value::String(format!("{{… {} keys}}", map.len()))
        }
        Value::Array(items) => {
            let mut shown: Vec<Value> = items
                .iter()
                .take(MAX_ITEMS)
                .enumerate()
                .map(|(i, item)| shorten(item, format!("{at}/{i}"), depth + 1, cut))
                .collect();
            if items.len() > MAX_ITEMS {
                cut.push(format!("{}/{}..", pointer_or_root(&at), MAX_ITEMS));
                shown.push(Value::String(format!(
                    "… {} more items",
                    items.len() - MAX_ITEMS
                )));
            }
            Value::Array(shown)
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            let mut shown = Map::new();
            for key in keys.iter().take(MAX_KEYS) {
                let place = format!("{at}/{}", escape_pointer(key));
                let mut name = match cut_string(key) {
                    Some(short) => {
                        cut.push(format!("{place} (its name)"));
                        short
                    }
                    None => (*key).clone(),
                };
                while shown.contains_key(&name) {
                    name.push('\'');
                }
                shown.insert(name, shorten(&map[*key], place, depth + 1, cut));
            }
            if keys.len() > MAX_KEYS {
                let rest: Vec<&str> = keys[MAX_KEYS..].iter().map(|k| k.as_str()).collect();
                cut.push(format!(
                    "{} ({} more keys: {})",
                    pointer_or_root(&at),
                    rest.len(),
                    rest.join(", ")
                ));
                shown.insert(
                    "…".into(),
                    Value::String(format!("{} more keys", rest.len())),
                );
            }
            Value::Object(shown)
        }
        scalar => scalar.clone(),
    }
}

/// A long string as its start, how much was cut, and its end.
fn cut_string(text: &str) -> Option<String> {
    let length = text.chars().count();
    if length <= 3 * STRING_ENDS {
        return None;
    }
    let start: String = text.chars().take(STRING_ENDS).collect();
    let end: String = text.chars().skip(length - STRING_ENDS).collect();
    Some(format!(
        "{start}…[{} characters cut]…{end}",
        length - 2 * STRING_ENDS
    ))
}

fn pointer_or_root(at: &str) -> String {
    if at.is_empty() {
        "/".into()
    } else {
        at.to_string()
    }
}

/// A key as a JSON pointer token (RFC 6901).
fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_arguments_are_shown_whole_redacted_and_escaped() {
        let shown = summary(&json!({"path": "a\u{1b}[2Jb", "api_key": "sk-1"}));
        assert!(shown.contains("[redacted]"), "{shown}");
        assert!(!shown.contains("sk-1"), "{shown}");
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(!shown.contains("too long"), "{shown}");
    }

    #[test]
    fn padding_cannot_push_a_key_out_of_view() {
        let padded = json!({"aaa": "x".repeat(5000), "command": "rm -rf /"});
        let shown = summary(&padded);
        assert!(shown.contains(r#""command":"rm -rf /""#), "{shown}");
        assert!(shown.contains("too long to show in full"), "{shown}");
        assert!(shown.contains("cut at /aaa"), "{shown}");
        assert!(shown.contains(&exact(&padded)), "{shown}");
        assert!(shown.chars().count() < 500, "{shown}");
        // Nested padding, and the end of a padded string, stay in view too.
        let nested = json!({"options": {"a": "y".repeat(4000), "force": true}, "run": format!("{}; rm -rf /", " ".repeat(3000))});
        let shown = summary(&nested);
        assert!(shown.contains(r#""force":true"#), "{shown}");
        assert!(shown.contains("rm -rf /"), "{shown}");
        assert!(
            shown.contains("/options/a") && shown.contains("/run"),
            "{shown}"
        );
    }

    #[test]
    fn many_keys_are_named_when_not_shown() {
        let mut map = Map::new();
        for i in 0..40 {
            map.insert(format!("k{i:02}"), json!(i));
        }
        map.insert("zz_drop".into(), json!(true));
        let shown = summary(&Value::Object(map));
        assert!(shown.contains("zz_drop"), "{shown}");
        assert!(shown.contains("more keys"), "{shown}");
    }

    #[test]
    fn exact_digests_ignore_key_order_but_not_redacted_values() {
        let a = json!({"b": 1, "a": {"y": 2, "x": 3}});
        let b = json!({"a": {"x": 3, "y": 2}, "b": 1});
        assert_eq!(exact(&a), exact(&b));
        let one = json!({"token": "one", "q": 1});
        let two = json!({"token": "two", "q": 1});
        assert_eq!(summary(&one), summary(&two));
        assert_ne!(exact(&one), exact(&two));
    }

    #[test]
    fn long_keys_are_cut_and_never_merge() {
        let k1 = format!("{}1", "k".repeat(300));
        let k2 = format!("{}2", "k".repeat(300));
        let shown = summary(&json!({k1: "a", k2: "b"}));
        assert!(shown.contains("(its name)"), "{shown}");
        assert!(
            shown.contains(r#""a""#) && shown.contains(r#""b""#),
            "{shown}"
        );
    }
}
