//! The book's table of the errors a call can return (`docs/cli.md`) is the
//! `ErrorKind` type's: one row per kind, under its name in JSON.

use std::fs;

use wasm_agent::ErrorKind::{self, *};

use crate::common::root;

/// Every kind. `name` below matches on each without a wildcard, so a kind
/// added to the type fails to compile here until it is listed (there, and
/// so here).
const EVERY_KIND: [ErrorKind; 15] = [
    InvalidArguments,
    UnknownTool,
    Failed,
    Timeout,
    OutOfFuel,
    MemoryLimit,
    StackOverflow,
    Trap,
    OutputTooLarge,
    CapabilityDenied,
    Cancelled,
    Denied,
    StoreUnavailable,
    AuditUnavailable,
    RateLimited,
];

/// The kind's name in JSON, by way of a match that must name every kind.
fn name(kind: ErrorKind) -> String {
    match kind {
        InvalidArguments | UnknownTool | Failed | Timeout | OutOfFuel | MemoryLimit
        | StackOverflow | Trap | OutputTooLarge | CapabilityDenied | Cancelled | Denied
        | StoreUnavailable | AuditUnavailable | RateLimited => serde_json::to_value(kind)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned(),
    }
}

#[test]
fn the_books_table_of_errors_has_one_row_per_kind() {
    let page = fs::read_to_string(root().join("docs/cli.md")).unwrap();
    let mut documented: Vec<String> = page
        .lines()
        .skip_while(|l| !l.starts_with("| Kind | When |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.split('|')
                .nth(1)
                .unwrap()
                .trim()
                .trim_matches('`')
                .to_owned()
        })
        .collect();
    let mut kinds: Vec<String> = EVERY_KIND.into_iter().map(name).collect();
    documented.sort();
    kinds.sort();
    assert_eq!(
        documented, kinds,
        "docs/cli.md's table of errors differs from ErrorKind"
    );
}
