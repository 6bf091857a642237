//! File tools: list, read, write and search inside the directories the host
//! grants (the component sees them as preopened directories at absolute
//! paths; everything else is simply not there).

mod search;

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use wasm_agent_guest::{Context, Output, Tool, ToolError, host};

/// What `read_file` returns when `max_bytes` is not given.
const DEFAULT_MAX_BYTES: u64 = 256 * 1024;

/// A failure with the action, the path and the OS error, for the model.
pub(crate) fn io_failed(action: &str, path: &str, error: &io::Error) -> ToolError {
    ToolError::failed(format!("cannot {action} {path}: {error}"))
}

/// A directory to list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListDirArgs {
    /// Absolute path of the directory, e.g. `/workspace/src`.
    path: String,
}

/// A file to read.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadFileArgs {
    /// Absolute path of the file.
    path: String,
    /// Read at most this many bytes from the start (default 262144).
    max_bytes: Option<u64>,
}

/// A file to write.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteFileArgs {
    /// Absolute path of the file; it is created if missing.
    path: String,
    /// The text to write.
    content: String,
    /// Add to the end of the file instead of replacing it (default false).
    append: Option<bool>,
}

/// What to search for, and where.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Absolute path of a directory (searched recursively) or of one file.
    path: String,
    /// The text to find in each line.
    pattern: String,
    /// Treat `pattern` as a regular expression (Rust `regex` syntax) instead
    /// of plain text (default false).
    regex: Option<bool>,
    /// Stop after this many matching lines (default 100).
    max_results: Option<usize>,
}

fn list_dir(args: ListDirArgs, _: &Context) -> Result<String, ToolError> {
    let entries = fs::read_dir(&args.path).map_err(|e| io_failed("list", &args.path, &e))?;
    let mut lines = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_failed("list", &args.path, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Not following symlinks: say what the entry is, not where it points.
        let line = match entry.metadata() {
            Ok(meta) if meta.is_dir() => format!("{name}/"),
            Ok(meta) if meta.is_symlink() => format!("{name} (symlink)"),
            Ok(meta) => format!("{name} ({} bytes)", meta.len()),
            Err(error) => format!("{name} (unreadable: {error})"),
        };
        lines.push(line);
    }
    lines.sort();
    if lines.is_empty() {
        return Ok(format!("{} is empty", args.path));
    }
    Ok(lines.join("\n"))
}

fn read_file(args: ReadFileArgs, _: &Context) -> Result<String, ToolError> {
    let limit = args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
    let file = fs::File::open(&args.path).map_err(|e| io_failed("read", &args.path, &e))?;
    let size = file.metadata().map(|meta| meta.len()).ok();
    // One byte past the limit tells whether there was more.
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_failed("read", &args.path, &e))?;
    let truncated = bytes.len() as u64 > limit;
    if truncated {
        bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    let shown = bytes.len();
    let (mut text, lossy) = decode_utf8_prefix(bytes, truncated);
    if lossy {
        text.push_str("\n[the file is not valid UTF-8; invalid bytes are shown as U+FFFD]");
    }
    if truncated {
        let of = size.map(|size| format!(" of {size}")).unwrap_or_default();
        text.push_str(&format!(
            "\n[truncated: showed the first {shown}{of} bytes; raise max_bytes to read more]"
        ));
    }
    Ok(text)
}

/// Text from bytes. When the read was `cut` at `max_bytes` it may end in the
/// middle of a UTF-8 character: that incomplete tail is dropped. Other
/// invalid bytes are replaced, and the flag says so.
fn decode_utf8_prefix(mut bytes: Vec<u8>, cut: bool) -> (String, bool) {
    if let Err(error) = std::str::from_utf8(&bytes)
        && cut
        && error.error_len().is_none()
    {
        bytes.truncate(error.valid_up_to());
    }
    match String::from_utf8(bytes) {
        Ok(text) => (text, false),
        Err(error) => (String::from_utf8_lossy(error.as_bytes()).into_owned(), true),
    }
}

fn write_file(args: WriteFileArgs, _: &Context) -> Result<String, ToolError> {
    let append = args.append.unwrap_or(false);
    let mut file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&args.path)
        .map_err(|e| io_failed("open for writing", &args.path, &e))?;
    file.write_all(args.content.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| io_failed("write", &args.path, &e))?;
    let verb = if append { "appended" } else { "wrote" };
    Ok(format!(
        "{verb} {} bytes to {}",
        args.content.len(),
        args.path
    ))
}

fn search(args: SearchArgs, _: &Context) -> Result<Output, ToolError> {
    let matcher = if args.regex.unwrap_or(false) {
        search::Matcher::regex(&args.pattern)?
    } else {
        search::Matcher::plain(&args.pattern)?
    };
    let max_results = args.max_results.unwrap_or(100).max(1);
    search::run(
        Path::new(&args.path),
        &args.path,
        &matcher,
        max_results,
        &host::cancelled,
    )
    .map(Output::text)
}

wasm_agent_guest::export_tools![
    Tool::new(
        "list_dir",
        "List a directory: one entry per line, directories ending in '/', files with \
         their size.",
        list_dir
    )
    .read_only()
    .idempotent(),
    Tool::new(
        "read_file",
        "Read a text file (the first max_bytes bytes; a note says when it was cut).",
        read_file
    )
    .read_only()
    .idempotent(),
    Tool::new(
        "write_file",
        "Write text to a file, replacing it (or appending with append=true). Creates the \
         file but not missing directories.",
        write_file
    )
    .destructive(),
    Tool::new(
        "search",
        "Find lines containing a text or regular expression in a file or, recursively, in \
         a directory. Returns path:line: text for each match.",
        search
    )
    .read_only()
    .idempotent(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_prefix_drops_a_cut_character_and_flags_real_garbage() {
        assert_eq!(
            decode_utf8_prefix(b"ab".to_vec(), false),
            ("ab".into(), false)
        );
        let mut cut = "aé".as_bytes().to_vec();
        cut.pop();
        assert_eq!(decode_utf8_prefix(cut.clone(), true), ("a".into(), false));
        assert_eq!(decode_utf8_prefix(cut, false), ("a\u{fffd}".into(), true));
        assert_eq!(
            decode_utf8_prefix(vec![b'a', 0xff, b'b'], true),
            ("a\u{fffd}b".into(), true)
        );
    }
}
