//! Recursive line search for the `search` tool.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use wasm_agent_guest::ToolError;

/// Files whose first bytes hold a NUL are taken as binary and skipped.
const BINARY_SNIFF_BYTES: usize = 8192;
/// Matching lines longer than this are shortened in the output.
const MAX_LINE_CHARS: usize = 200;
/// Files larger than this are skipped rather than read whole.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// What a line must contain.
pub enum Matcher {
    /// A literal substring.
    Plain(String),
    /// A regular expression.
    Regex(regex::Regex),
}

impl Matcher {
    /// Matches lines containing `pattern` literally.
    pub fn plain(pattern: &str) -> Result<Self, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::invalid_arguments("pattern is empty"));
        }
        Ok(Self::Plain(pattern.to_owned()))
    }

    /// Matches lines matching the regular expression `pattern`.
    pub fn regex(pattern: &str) -> Result<Self, ToolError> {
        regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map(Self::Regex)
            .map_err(|error| {
                ToolError::invalid_arguments(format!("invalid regular expression: {error}"))
            })
    }

    fn is_match(&self, line: &str) -> bool {
        match self {
            Self::Plain(text) => line.contains(text.as_str()),
            Self::Regex(regex) => regex.is_match(line),
        }
    }
}

/// Searches `root` (a file, or a directory walked recursively without
/// following symlinks) and formats up to `max_results` matches as
/// `path:line: text`. `stop` is polled between files so a cancelled call
/// ends early.
pub fn run(
    root: &Path,
    shown_root: &str,
    matcher: &Matcher,
    max_results: usize,
    stop: &dyn Fn() -> bool,
) -> Result<String, ToolError> {
    let meta = fs::metadata(root).map_err(|e| crate::io_failed("search", shown_root, &e))?;
    let mut pending: Vec<PathBuf> = vec![root.to_path_buf()];
    let mut matches: Vec<String> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut files = 0usize;
    let mut full = false;
    let mut stopped = false;
    while let Some(path) = pending.pop() {
        if stop() {
            stopped = true;
            break;
        }
        let is_root = path == root;
        let kind = if is_root {
            Ok(meta.clone())
        } else {
            fs::symlink_metadata(&path)
        };
        let kind = match kind {
            Ok(kind) => kind,
            Err(error) => {
                skipped.push(format!("{}: {error}", path.display()));
                continue;
            }
        };
        if kind.is_dir() {
            match sorted_children(&path) {
                // Reversed so that popping visits them in name order.
                Ok(children) => pending.extend(children.into_iter().rev()),
                Err(error) => skipped.push(format!("{}: {error}", path.display())),
            }
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        if kind.len() > MAX_FILE_BYTES {
            skipped.push(format!(
                "{}: larger than {MAX_FILE_BYTES} bytes",
                path.display()
            ));
            continue;
        }
        files += 1;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                skipped.push(format!("{}: {error}", path.display()));
                continue;
            }
        };
        if bytes.iter().take(BINARY_SNIFF_BYTES).any(|&byte| byte == 0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (number, line) in text.lines().enumerate() {
            if !matcher.is_match(line) {
                continue;
            }
            if matches.len() == max_results {
                full = true;
                break;
            }
            matches.push(format!(
                "{}:{}: {}",
                path.display(),
                number + 1,
                shorten(line)
            ));
        }
        if full {
            break;
        }
    }

    let mut out = if matches.is_empty() {
        format!("no matches in {shown_root} ({files} files searched)")
    } else {
        matches.join("\n")
    };
    if full {
        let _ = write!(
            out,
            "\n[stopped at {max_results} matches; raise max_results or narrow the path]"
        );
    }
    if stopped {
        out.push_str("\n[the call was cancelled; results are incomplete]");
    }
    if let Some(first) = skipped.first() {
        let _ = write!(
            out,
            "\n[skipped {} entries that could not be read; first: {first}]",
            skipped.len()
        );
    }
    Ok(out)
}

fn sorted_children(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut children = fs::read_dir(dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    children.sort();
    Ok(children)
}

fn shorten(line: &str) -> String {
    let line = line.trim_end();
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_owned();
    }
    let head: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{head}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("files-search-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("a.txt"), "alpha\nbeta\nALPHA beta\n").unwrap();
        fs::write(dir.join("sub/b.txt"), "gamma alpha\n").unwrap();
        fs::write(dir.join("sub/bin.dat"), b"alpha\0binary").unwrap();
        dir
    }

    #[test]
    fn plain_and_regex_search_walks_recursively_in_name_order() {
        let dir = scratch("walk");
        let shown = dir.display().to_string();
        let never = || false;
        let out = run(&dir, &shown, &Matcher::plain("alpha").unwrap(), 10, &never).unwrap();
        assert_eq!(
            out,
            format!("{shown}/a.txt:1: alpha\n{shown}/sub/b.txt:1: gamma alpha")
        );
        let out = run(
            &dir,
            &shown,
            &Matcher::regex("(?i)^alpha").unwrap(),
            10,
            &never,
        )
        .unwrap();
        assert_eq!(
            out,
            format!("{shown}/a.txt:1: alpha\n{shown}/a.txt:3: ALPHA beta")
        );
        let out = run(&dir, &shown, &Matcher::plain("beta").unwrap(), 1, &never).unwrap();
        assert!(out.ends_with("[stopped at 1 matches; raise max_results or narrow the path]"));
        let out = run(&dir, &shown, &Matcher::plain("zeta").unwrap(), 10, &never).unwrap();
        assert_eq!(out, format!("no matches in {shown} (3 files searched)"));
        let file = dir.join("sub/b.txt");
        let out = run(&file, "b", &Matcher::plain("gamma").unwrap(), 10, &never).unwrap();
        assert!(out.ends_with("b.txt:1: gamma alpha"), "{out}");
        let out = run(&dir, &shown, &Matcher::plain("alpha").unwrap(), 10, &|| {
            true
        })
        .unwrap();
        assert!(out.contains("cancelled"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(
            Matcher::plain(""),
            Err(ToolError::InvalidArguments(_))
        ));
        let error = Matcher::regex("(").err().unwrap();
        assert!(
            error.message().starts_with("invalid regular expression"),
            "{error}"
        );
        let missing = Path::new("/definitely/not/here");
        let error = run(
            missing,
            "/definitely/not/here",
            &Matcher::plain("x").unwrap(),
            1,
            &|| false,
        )
        .unwrap_err();
        assert!(
            error
                .message()
                .starts_with("cannot search /definitely/not/here: "),
            "{error}"
        );
    }
}
