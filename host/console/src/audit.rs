//! The audit page: the log's records searched (tool, caller, outcome, time
//! range), newest first; the chain checked as `wasm-agent audit verify`
//! checks it, with its head; the matches exported as JSON lines.

use std::io::{BufRead, Read as _};
use std::path::Path;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;
use wasm_agent_audit::{Expect, log_files, verify};

/// Most rows the page shows.
pub const SHOWN: usize = 200;
/// Largest export.
pub const MAX_EXPORT: usize = 64 << 20;
/// Longest record line read (longer ones are skipped).
const MAX_LINE: usize = 1 << 20;
/// Longest search field.
pub const MAX_FIELD: usize = 256;

/// A search, as the form sends it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Filter {
    pub tool: String,
    pub who: String,
    pub outcome: String,
    pub from: String,
    pub to: String,
}

/// A search with its times read.
struct Search {
    filter: Filter,
    from: Option<SystemTime>,
    to: Option<SystemTime>,
}

impl Filter {
    /// The filter, unless a field is over [`MAX_FIELD`] bytes.
    pub(crate) fn bounded(self) -> Result<Self, String> {
        let fields = [&self.tool, &self.who, &self.outcome, &self.from, &self.to];
        match fields.iter().any(|f| f.len() > MAX_FIELD) {
            true => Err(format!(
                "bad search: a field is over the {MAX_FIELD}-byte limit"
            )),
            false => Ok(self),
        }
    }

    fn read(mut self) -> Result<Search, String> {
        // Compared lowercased, so lowercased once here.
        self.tool = self.tool.trim().to_lowercase();
        self.who = self.who.trim().to_lowercase();
        let time = |text: &str, name: &str| match text.trim() {
            "" => Ok(None),
            text => humantime::parse_rfc3339_weak(text)
                .map(Some)
                .map_err(|_| format!("{name}: {text:?} is not a time like 2026-12-05T10:00:00Z")),
        };
        Ok(Search {
            from: time(&self.from, "From")?,
            to: time(&self.to, "To")?,
            filter: self,
        })
    }

    /// The filter as a query string (for the export link).
    pub(crate) fn query(&self) -> String {
        serde_urlencoded::to_string([
            ("tool", &self.tool),
            ("who", &self.who),
            ("outcome", &self.outcome),
            ("from", &self.from),
            ("to", &self.to),
        ])
        .unwrap_or_default()
    }
}

impl Search {
    fn matches(&self, record: &Value) -> bool {
        let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("");
        let contains =
            |hay: &str, needle: &str| needle.is_empty() || hay.to_lowercase().contains(needle);
        let f = &self.filter;
        let outcome = match text("event") {
            "call" => text("outcome"),
            other => other,
        };
        let when = humantime::parse_rfc3339_weak(text("time")).ok();
        // Callers of calls, and operators with the callers they answered.
        let who = ["principal", "tenant", "operator", "caller"];
        contains(text("tool"), &f.tool)
            && who.iter().any(|key| contains(text(key), &f.who))
            && (f.outcome.trim().is_empty() || outcome == f.outcome.trim())
            && self.from.is_none_or(|from| when.is_some_and(|w| w >= from))
            && self.to.is_none_or(|to| when.is_some_and(|w| w <= to))
    }
}

/// A row of the page.
pub(crate) struct AuditRow {
    pub seq: String,
    pub time: String,
    pub event: String,
    pub tool: String,
    pub caller: String,
    pub outcome: String,
    pub decided_by: String,
}

/// What a search found: how many matched, the newest [`SHOWN`].
pub(crate) struct Found {
    pub matched: u64,
    pub rows: Vec<AuditRow>,
}

/// Every record of the log at `path` that `filter` matches, in order, to
/// `each` (which says whether to go on).
fn scan(
    path: &Path,
    filter: Filter,
    mut each: impl FnMut(&str, &Value) -> bool,
) -> Result<(), String> {
    let search = filter.read()?;
    for file in log_files(path) {
        let Ok(opened) = std::fs::File::open(&file) else {
            continue;
        };
        let mut reader = std::io::BufReader::new(opened);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            if read == 0 {
                break;
            }
            if line.len() > MAX_LINE && !line.ends_with(b"\n") {
                // Skip the rest of an overlong line.
                let _ = reader.skip_until(b'\n');
                continue;
            }
            let Ok(text) = std::str::from_utf8(&line) else {
                continue;
            };
            let Ok(record) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            if search.matches(&record) && !each(text.trim_end(), &record) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Searches the log at `path`.
pub(crate) fn search(path: &Path, filter: Filter) -> Result<Found, String> {
    let mut matched = 0;
    let mut newest = std::collections::VecDeque::with_capacity(SHOWN);
    scan(path, filter, |_, record| {
        matched += 1;
        if newest.len() == SHOWN {
            newest.pop_front();
        }
        newest.push_back(row(record));
        true
    })?;
    Ok(Found {
        matched,
        rows: newest.into_iter().rev().collect(),
    })
}

/// The matching records as JSON lines (at most [`MAX_EXPORT`] bytes), and
/// whether there were more.
pub(crate) fn export(path: &Path, filter: Filter) -> Result<(Vec<u8>, bool), String> {
    let mut out = Vec::new();
    let mut cut = false;
    scan(path, filter, |text, _| {
        if out.len() + text.len() + 1 > MAX_EXPORT {
            cut = true;
            return false;
        }
        out.extend_from_slice(text.as_bytes());
        out.push(b'\n');
        true
    })?;
    Ok((out, cut))
}

fn row(record: &Value) -> AuditRow {
    let text = |key: &str| {
        record
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let event = text("event");
    let (outcome, caller, decided_by) = match event.as_str() {
        "call" => (
            text("outcome"),
            crate::calls::caller(&text("principal"), &text("tenant")),
            text("decided_by"),
        ),
        // An operator's action: what they did, about whose call.
        "operator" => (
            text("action"),
            text("caller"),
            format!("operator {}", text("operator")),
        ),
        _ => (String::new(), String::new(), String::new()),
    };
    AuditRow {
        seq: record.get("seq").map(Value::to_string).unwrap_or_default(),
        time: text("time"),
        tool: text("tool"),
        outcome,
        caller,
        decided_by,
        event,
    }
}

/// The chain's state in words, and whether it holds.
pub(crate) fn chain_state(path: &Path) -> (String, bool) {
    match verify(path, &Expect::default()) {
        Ok(verified) => {
            let noted = verified
                .noted_head
                .map(|h| format!("; noted head: record {}", h.seq))
                .unwrap_or_default();
            (
                format!(
                    "The chain holds: {} records in {} file(s), head {}{noted}.",
                    verified.records,
                    verified.files.len(),
                    verified.head
                ),
                true,
            )
        }
        Err(error) => (format!("The chain does not hold: {error}"), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn write_log(dir: &Path) -> PathBuf {
        let path = dir.join("audit.jsonl");
        let lines = [
            json!({"seq": 0, "event": "open", "time": "2026-12-05T09:00:00Z"}),
            json!({"seq": 1, "event": "call", "time": "2026-12-05T10:00:00Z", "tool": "fetch",
                   "principal": "alice", "tenant": "acme", "outcome": "ok"}),
            json!({"seq": 2, "event": "call", "time": "2026-12-05T11:00:00Z", "tool": "fetch",
                   "principal": "bob", "outcome": "capability_denied"}),
            json!({"seq": 3, "event": "call", "time": "2026-12-05T12:00:00Z", "tool": "calculate",
                   "principal": "alice", "outcome": "ok"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\nnot json\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn searches_by_tool_caller_outcome_and_time_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        let found = search(
            &path,
            Filter {
                tool: "FETCH".into(),
                ..Filter::default()
            },
        )
        .unwrap();
        assert_eq!(found.matched, 2);
        assert_eq!(found.rows[0].seq, "2");
        let found = search(
            &path,
            Filter {
                who: "acme".into(),
                ..Filter::default()
            },
        )
        .unwrap();
        assert_eq!(found.matched, 1);
        let found = search(
            &path,
            Filter {
                outcome: "ok".into(),
                from: "2026-12-05T11:30:00Z".into(),
                ..Filter::default()
            },
        )
        .unwrap();
        assert_eq!(
            (found.matched, found.rows[0].tool.as_str()),
            (1, "calculate")
        );
        let error = search(
            &path,
            Filter {
                to: "yesterday".into(),
                ..Filter::default()
            },
        );
        assert!(error.err().unwrap().contains("To: \"yesterday\""));
    }

    #[test]
    fn exports_the_matching_lines_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        let (lines, cut) = export(
            &path,
            Filter {
                who: "alice".into(),
                ..Filter::default()
            },
        )
        .unwrap();
        let text = String::from_utf8(lines).unwrap();
        assert!(!cut);
        assert_eq!(text.lines().count(), 2);
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok())
        );
    }
}
