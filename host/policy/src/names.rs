//! Grants by name: which agents a tool may delegate to (`delegate`) and
//! which of the host's tools it may call (`call_tools`).

/// Whether a `delegate` list (agent names, or `*` for any) admits `agent`.
pub fn delegation_allowed(allowed: &[String], agent: &str) -> bool {
    allowed.iter().any(|a| a == "*" || a == agent)
}

/// Whether a `call_tools` list of tool-name patterns (`*` matches any run
/// of characters: `json_*`, `*`) admits the tool `name`.
pub fn tool_call_allowed(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|pattern| glob_matches(pattern, name))
}

/// Whether `pattern` is a valid `call_tools` entry: 1-64 characters of
/// `[a-zA-Z0-9_-*]`.
pub(crate) fn valid_tool_pattern(pattern: &str) -> bool {
    (1..=64).contains(&pattern.len())
        && pattern
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'*'))
}

/// `*`-only glob matching in linear time (one pending star, greedy).
fn glob_matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == t[j] {
            i += 1;
            j += 1;
        } else if let Some((star_at, matched)) = star {
            i = star_at + 1;
            j = matched + 1;
            star = Some((star_at, matched + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(patterns: &[&str], name: &str) -> bool {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        tool_call_allowed(&patterns, name)
    }

    #[test]
    fn tool_patterns_match_whole_names() {
        assert!(allowed(&["calculate"], "calculate"));
        assert!(!allowed(&["calculate"], "calculate2"));
        assert!(!allowed(&["calc"], "calculate"));
        assert!(allowed(&["json_*"], "json_query"));
        assert!(allowed(&["json_*"], "json_"));
        assert!(!allowed(&["json_*"], "xjson_query"));
        assert!(allowed(&["*"], "anything"));
        assert!(allowed(&["*_query"], "json_query"));
        assert!(allowed(&["a*b*c"], "aXbYc"));
        assert!(!allowed(&["a*b*c"], "aXbY"));
        assert!(allowed(&["a**"], "a"));
        assert!(!allowed(&[], "calculate"));
    }

    #[test]
    fn pathological_patterns_stay_linear() {
        let name = "a".repeat(64);
        let pattern = format!("{}b", "*a".repeat(31));
        assert!(!allowed(&[&pattern], &name));
    }

    #[test]
    fn patterns_are_names_with_stars() {
        for good in ["calculate", "json_*", "*", "a-b_c"] {
            assert!(valid_tool_pattern(good), "{good}");
        }
        for bad in ["", "a b", "x/y", "é", &"a".repeat(65)] {
            assert!(!valid_tool_pattern(bad), "{bad:?}");
        }
    }
}
