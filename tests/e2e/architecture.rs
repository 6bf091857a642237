//! ARCHITECTURE.md's crate table is the tree's: one row per crate under
//! `host/`, named as its Cargo.toml names it, and no row for a crate or
//! folder that is gone.

use std::collections::BTreeMap;
use std::fs;

use crate::common::root;

/// `host/FOLDER` → the crate name its Cargo.toml gives.
fn crates() -> BTreeMap<String, String> {
    let mut crates = BTreeMap::new();
    for entry in fs::read_dir(root().join("host")).unwrap() {
        let folder = entry.unwrap().path();
        let Ok(manifest) = fs::read_to_string(folder.join("Cargo.toml")) else {
            continue;
        };
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .expect("a [package] name")
            .trim_matches('"')
            .to_owned();
        let folder = format!("host/{}", folder.file_name().unwrap().to_string_lossy());
        crates.insert(folder, name);
    }
    crates
}

/// The crate table's rows: folder → crate name, as written.
fn table() -> BTreeMap<String, String> {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("| crate | folder |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[2].to_owned(), cells[1].to_owned())
        })
        .collect()
}

#[test]
fn the_architecture_names_every_crate_of_the_tree_and_no_other() {
    let crates = crates();
    assert!(crates.len() > 10, "host/ holds the crates");
    assert_eq!(
        table(),
        crates,
        "ARCHITECTURE.md's crate table differs from host/*/Cargo.toml"
    );
}
