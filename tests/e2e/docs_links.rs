//! The README and the book (`docs/`, built by mdBook) hold together: every
//! relative link names a file that exists and, with `#anchor`, a heading in
//! it; every page of the book is in its table of contents; the pages the
//! book includes link to nothing relative (their links would resolve from
//! another folder in the book than on their own).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::root;

/// The README, the top-level documents and every page of the book.
pub fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The page's text with mdBook's `{{#include FILE[:ANCHOR]}}` lines
/// replaced by what they include.
fn expanded(page: &Path) -> String {
    let text = fs::read_to_string(page).unwrap();
    text.lines()
        .map(|line| match included(line) {
            Some(include) => inclusion(page, include),
            None => format!("{line}\n"),
        })
        .collect()
}

/// What `{{#include FILE[:ANCHOR]}}` on a line names.
fn included(line: &str) -> Option<&str> {
    line.trim().strip_prefix("{{#include ")?.strip_suffix("}}")
}

/// The text `FILE[:ANCHOR]` includes into `page`: the whole file, or its
/// lines between `ANCHOR: name` and `ANCHOR_END: name`.
fn inclusion(page: &Path, include: &str) -> String {
    let (file, anchor) = include.split_once(':').unwrap_or((include, ""));
    let path = page.parent().unwrap().join(file);
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: includes {include}: {e}", page.display()));
    if anchor.is_empty() {
        return text;
    }
    let start = format!("ANCHOR: {anchor} ");
    let end = format!("ANCHOR_END: {anchor} ");
    let region: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains(&start))
        .skip(1)
        .take_while(|l| !l.contains(&end))
        .collect();
    assert!(
        !region.is_empty(),
        "{}: includes {include}, which is empty or missing",
        page.display()
    );
    region.join("\n") + "\n"
}

/// The lines outside fenced code blocks, with inline code removed.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            let mut kept = String::new();
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 0 {
                    kept.push_str(part);
                }
            }
            lines.push(kept);
        }
    }
    lines
}

/// A heading's anchor as GitHub and mdBook both make it.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (included pages' too).
fn anchors(page: &Path) -> BTreeSet<String> {
    let text = expanded(page);
    let mut fenced = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#').trim()));
        }
    }
    anchors
}

/// Every link target written `](target)` in a page's prose.
fn links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    for line in prose(text) {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            links.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    links
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn every_relative_link_names_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        for target in links(&text).into_iter().filter(|t| !is_external(t)) {
            let (file, heading) = target.split_once('#').unwrap_or((&target, ""));
            let file = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !file.exists() {
                broken.push(format!("{}: ({target}): no such file", page.display()));
            } else if !heading.is_empty()
                && file.extension().is_some_and(|e| e == "md")
                && !anchors(&file).contains(heading)
            {
                broken.push(format!("{}: ({target}): no such heading", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_table_of_contents() {
    let docs = root().join("docs");
    let summary = fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).iter().map(|l| docs.join(l)).collect();
    for page in pages().into_iter().filter(|p| p.starts_with(&docs)) {
        assert!(
            page.ends_with("SUMMARY.md") || listed.contains(&page),
            "{} is not in docs/SUMMARY.md, so the book leaves it out",
            page.display()
        );
    }
    for page in &listed {
        assert!(
            page.exists(),
            "docs/SUMMARY.md lists {}, which is missing",
            page.display()
        );
    }
}

#[test]
fn pages_the_book_includes_link_to_nothing_relative() {
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        for include in text.lines().filter_map(included) {
            if include.split(':').next().unwrap().ends_with(".md") {
                let relative: Vec<_> = links(&inclusion(&page, include))
                    .into_iter()
                    .filter(|t| !is_external(t) && !t.starts_with('#'))
                    .collect();
                assert!(
                    relative.is_empty(),
                    "{include} is included by {}, so its relative links {relative:?} break in one of them",
                    page.display()
                );
            }
        }
    }
}
