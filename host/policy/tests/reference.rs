//! The book's policy reference (`docs/policy.md`) is checked against the
//! `Policy` type: one row per key, no row for a key that does not exist,
//! each default the one `Policy::default()` has, and each flag one the
//! binary's `call --help` (`docs/cli/wasm-agent-call.md`, itself checked
//! against the binary) lists.

use serde_json::Value;
use wasm_agent_policy::{LAYER_KEYS, Policy, PolicyLayer};

const REFERENCE: &str = include_str!("../../../docs/policy.md");
const CALL_HELP: &str = include_str!("../../../docs/cli/wasm-agent-call.md");

/// One row of the reference table: key, flag and default, as written.
struct Row {
    key: String,
    flag: String,
    default: String,
}

/// The cells of a table row, split at pipes not escaped as `\|`.
fn cells(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = line.trim().trim_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push(chars.next().unwrap())
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells
        .iter()
        .map(|c| c.trim().trim_matches('`').to_string())
        .collect()
}

fn rows() -> Vec<Row> {
    let mut lines = REFERENCE.lines().skip_while(|l| !l.starts_with("| Key |"));
    let header = cells(lines.next().expect("docs/policy.md has a `| Key |` table"));
    assert_eq!(header[..4], ["Key", "CLI flag", "Builder", "Default"]);
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let c = cells(l);
            Row {
                key: c[0].clone(),
                flag: c[1].clone(),
                default: c[3].clone(),
            }
        })
        .collect()
}

#[test]
fn the_reference_has_one_row_per_policy_key() {
    let mut documented: Vec<String> = rows().into_iter().map(|r| r.key).collect();
    let mut keys: Vec<String> = LAYER_KEYS.iter().map(|k| k.to_string()).collect();
    documented.sort();
    keys.sort();
    assert_eq!(
        documented, keys,
        "docs/policy.md's table and the policy's keys differ"
    );
}

#[test]
fn every_flag_in_the_reference_is_one_the_binary_has() {
    for row in rows() {
        let flag = row.flag.split([' ', '=']).next().unwrap();
        assert!(
            flag.starts_with("--"),
            "`{}`: flag cell {:?}",
            row.key,
            row.flag
        );
        assert!(
            CALL_HELP.contains(&format!("{flag} ")) || CALL_HELP.contains(&format!("{flag}\n")),
            "`{}`: {flag} is not a flag of `wasm-agent call`",
            row.key
        );
    }
}

#[test]
fn every_default_in_the_reference_is_the_policys() {
    let defaults = serde_json::to_value(Policy::default()).unwrap();
    for row in rows() {
        let actual = &defaults[row.key.as_str()];
        match row.default.as_str() {
            "none" => assert!(
                actual.is_null()
                    || actual == &Value::Array(vec![])
                    || actual == &Value::Object(Default::default()),
                "`{}`: documented none, is {actual}",
                row.key
            ),
            "unlimited" => assert!(
                actual.is_null(),
                "`{}`: documented unlimited, is {actual}",
                row.key
            ),
            "off" => assert_eq!(actual, &Value::Bool(false), "`{}`: documented off", row.key),
            written => {
                let text = if written.parse::<u64>().is_ok() {
                    format!("{} = {written}", row.key)
                } else {
                    format!("{} = {written:?}", row.key)
                };
                let layer: PolicyLayer = toml::from_str(&text).unwrap_or_else(|e| {
                    panic!("`{}`: default {written:?} does not parse: {e}", row.key)
                });
                assert_eq!(
                    &serde_json::to_value(layer).unwrap()[row.key.as_str()],
                    actual,
                    "`{}`: documented default {written:?} is not the policy's",
                    row.key
                );
            }
        }
    }
}
