//! The book's table of the errors a call can return (`docs/cli.md`) is the
//! `ErrorKind` type's: one row per kind, under its name in JSON.

use std::fs;

use wasm_agent::ErrorKind;

use crate::common::root;

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
    let mut kinds: Vec<String> = ErrorKind::all().map(|k| k.as_str().to_owned()).collect();
    documented.sort();
    kinds.sort();
    assert_eq!(
        documented, kinds,
        "docs/cli.md's table of errors differs from ErrorKind"
    );
}
