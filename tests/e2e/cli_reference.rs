//! The command-line reference in `docs/cli/` is the binary's own help, one
//! page per command: this test fails when a page and the binary differ, and
//! with `WASM_AGENT_UPDATE_DOCS=1` (`make cli-reference`) writes the pages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::common::root;

/// The help of `wasm-agent COMMAND... --help`, as anyone gets it: no
/// variable of the caller's shows up as a default.
fn help(command: &[String]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_wasm-agent"))
        .args(command)
        .arg("--help")
        .env_clear()
        .output()
        .expect("wasm-agent runs");
    assert!(output.status.success(), "{command:?} --help failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists (its `Commands:` section), `help` aside.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command's page: file name, then contents.
fn pages() -> BTreeMap<String, String> {
    let mut pages = BTreeMap::new();
    let mut pending = vec![Vec::<String>::new()];
    while let Some(command) = pending.pop() {
        let text = help(&command);
        for sub in subcommands(&text) {
            pending.push([command.clone(), vec![sub]].concat());
        }
        let words = [vec!["wasm-agent".to_owned()], command].concat().join(" ");
        let page = format!(
            "# `{words}`\n\n<!-- The binary's help, written by `make cli-reference`; `make test` \
             checks that they agree. -->\n\n```text\n$ {words} --help\n{text}```\n"
        );
        pages.insert(format!("{}.md", words.replace(' ', "-")), page);
    }
    pages
}

fn folder() -> PathBuf {
    root().join("docs/cli")
}

#[test]
fn every_command_has_a_page_that_is_its_help() {
    let pages = pages();
    assert!(
        pages.contains_key("wasm-agent-serve.md"),
        "{:?}",
        pages.keys()
    );
    assert!(pages.contains_key("wasm-agent-access-explain.md"));
    if std::env::var_os("WASM_AGENT_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(folder()).unwrap();
        for entry in std::fs::read_dir(folder()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, page) in &pages {
            std::fs::write(folder().join(name), page).unwrap();
        }
        return;
    }
    let mut stale = Vec::new();
    for (name, page) in &pages {
        match std::fs::read_to_string(folder().join(name)) {
            Ok(written) if written == *page => {}
            _ => stale.push(name.clone()),
        }
    }
    for entry in std::fs::read_dir(folder()).expect("docs/cli exists") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !pages.contains_key(&name) {
            stale.push(format!("{name} (no such command)"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/cli differs from the binary's help for {stale:?}: run `make cli-reference`"
    );
}
