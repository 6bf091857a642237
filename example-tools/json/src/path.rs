//! Paths into a JSON document: RFC 6901 pointers (`/a/0/b`) and the simple
//! dotted form (`$.a.b[0].c`, `a["key.with.dots"][-1]`).

use serde_json::Value;

/// One step from a value to one of its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An object key; on an array, a non-negative decimal index (pointer
    /// tokens and `a.0` are written this way).
    Key(String),
    /// A bracketed array index; negative counts from the end.
    Index(i64),
}

/// Parses `path`: a JSON pointer if it is empty or starts with `/`, the
/// simple form otherwise.
pub fn parse(path: &str) -> Result<Vec<Step>, String> {
    if path.is_empty() || path.starts_with('/') {
        parse_pointer(path)
    } else {
        parse_simple(path)
    }
}

fn parse_pointer(pointer: &str) -> Result<Vec<Step>, String> {
    pointer
        .split('/')
        .skip(1)
        .map(|token| {
            let mut key = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    key.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => key.push('~'),
                    Some('1') => key.push('/'),
                    _ => {
                        return Err(format!(
                            "JSON pointer token {token:?} has a '~' not followed by 0 or 1 \
                             (write ~0 for '~' and ~1 for '/')"
                        ));
                    }
                }
            }
            Ok(Step::Key(key))
        })
        .collect()
}

fn parse_simple(path: &str) -> Result<Vec<Step>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut index = 0;
    if chars.first() == Some(&'$') {
        index = 1;
    }
    // Without `$` the path may open with a bare name (`a.b`) or a bracket
    // (`[0].a`); after `$` it must go on with '.' or '['.
    let mut expect_name = index == 0 && chars.first() != Some(&'[');
    let error =
        |message: &str, at: usize| format!("{message} at position {} in path {path:?}", at + 1);
    while index < chars.len() || expect_name {
        if expect_name {
            let start = index;
            while index < chars.len() && !matches!(chars[index], '.' | '[') {
                index += 1;
            }
            if index == start {
                return Err(error("expected a key name", start));
            }
            steps.push(Step::Key(chars[start..index].iter().collect()));
            expect_name = false;
            continue;
        }
        match chars[index] {
            '.' => {
                index += 1;
                expect_name = true;
            }
            '[' => {
                let (step, end) =
                    bracket(&chars, index).map_err(|message| error(&message, index))?;
                steps.push(step);
                index = end;
            }
            other => {
                return Err(error(
                    &format!("expected '.' or '[' but found '{other}'"),
                    index,
                ));
            }
        }
    }
    Ok(steps)
}

/// Parses `[12]`, `[-1]`, `["key"]` or `['key']` starting at the `[`.
fn bracket(chars: &[char], open: usize) -> Result<(Step, usize), String> {
    let mut index = open + 1;
    match chars.get(index) {
        Some(&quote @ ('"' | '\'')) => {
            index += 1;
            let mut key = String::new();
            loop {
                match chars.get(index) {
                    None => return Err(format!("unterminated {quote}-quoted key")),
                    Some('\\') => {
                        let Some(&escaped) = chars.get(index + 1) else {
                            return Err(format!("unterminated {quote}-quoted key"));
                        };
                        key.push(escaped);
                        index += 2;
                    }
                    Some(&c) if c == quote => {
                        index += 1;
                        break;
                    }
                    Some(&c) => {
                        key.push(c);
                        index += 1;
                    }
                }
            }
            if chars.get(index) != Some(&']') {
                return Err("expected ']' after the quoted key".into());
            }
            Ok((Step::Key(key), index + 1))
        }
        _ => {
            let start = index;
            while index < chars.len() && chars[index] != ']' {
                index += 1;
            }
            if index == chars.len() {
                return Err("'[' without a matching ']'".into());
            }
            let text: String = chars[start..index].iter().collect();
            let number = text
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("{text:?} is not an array index; quote keys as [\"key\"]"))?;
            Ok((Step::Index(number), index + 1))
        }
    }
}

/// Renders steps in the simple form, for messages.
pub fn render(steps: &[Step]) -> String {
    let mut text = String::from("$");
    for step in steps {
        match step {
            Step::Key(key) if is_plain_key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Key(key) => {
                text.push('[');
                text.push_str(&serde_json::Value::String(key.clone()).to_string());
                text.push(']');
            }
            Step::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// Follows `steps` from `document`, or says where and why the path breaks.
pub fn lookup<'a>(document: &'a Value, steps: &[Step]) -> Result<&'a Value, String> {
    let mut current = document;
    for (depth, step) in steps.iter().enumerate() {
        let here = || render(&steps[..depth]);
        current = match (current, step) {
            (Value::Object(map), Step::Key(key)) => match map.get(key) {
                Some(value) => value,
                None => {
                    let mut keys: Vec<&str> = map.keys().map(String::as_str).take(20).collect();
                    if map.len() > keys.len() {
                        keys.push("…");
                    }
                    let keys = if keys.is_empty() {
                        "it is empty".to_owned()
                    } else {
                        format!("its keys are {}", keys.join(", "))
                    };
                    return Err(format!("{} has no key {key:?}; {keys}", here()));
                }
            },
            (Value::Array(items), Step::Key(key)) => {
                let index = key
                    .parse::<usize>()
                    .map_err(|_| format!("{} is an array, so {key:?} must be an index", here()))?;
                element(items, index as i64, &here)?
            }
            (Value::Array(items), Step::Index(index)) => element(items, *index, &here)?,
            (Value::Object(_), Step::Index(index)) => {
                return Err(format!(
                    "{} is an object, not an array; use [\"{index}\"] for a key named {index}",
                    here()
                ));
            }
            (scalar, _) => {
                return Err(format!(
                    "{} is {}, which has no children",
                    here(),
                    type_name(scalar)
                ));
            }
        };
    }
    Ok(current)
}

fn element<'a>(
    items: &'a [Value],
    index: i64,
    here: &dyn Fn() -> String,
) -> Result<&'a Value, String> {
    let resolved = if index < 0 {
        i64::try_from(items.len())
            .ok()
            .and_then(|len| usize::try_from(len + index).ok())
    } else {
        usize::try_from(index).ok()
    };
    resolved.and_then(|i| items.get(i)).ok_or_else(|| {
        format!(
            "index {index} is out of range: {} has {} item{}",
            here(),
            items.len(),
            if items.len() == 1 { "" } else { "s" }
        )
    })
}

/// "an object", "a string", ... for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(k: &str) -> Step {
        Step::Key(k.to_owned())
    }

    #[test]
    fn pointers() {
        assert_eq!(parse(""), Ok(vec![]));
        assert_eq!(parse("/"), Ok(vec![key("")]));
        assert_eq!(parse("/a/0/b"), Ok(vec![key("a"), key("0"), key("b")]));
        assert_eq!(
            parse("/a~1b/c~0d/~01"),
            Ok(vec![key("a/b"), key("c~d"), key("~1")])
        );
        assert!(
            parse("/a~2")
                .unwrap_err()
                .contains("'~' not followed by 0 or 1")
        );
        assert!(parse("/a~").is_err());
    }

    #[test]
    fn simple_paths() {
        assert_eq!(parse("$"), Ok(vec![]));
        assert_eq!(parse("a"), Ok(vec![key("a")]));
        assert_eq!(
            parse("a.b[0].c"),
            Ok(vec![key("a"), key("b"), Step::Index(0), key("c")])
        );
        assert_eq!(parse("$.a.b[0].c"), parse("a.b[0].c"));
        assert_eq!(parse("$[2]"), Ok(vec![Step::Index(2)]));
        assert_eq!(parse("[-1].a"), Ok(vec![Step::Index(-1), key("a")]));
        assert_eq!(
            parse("$[-1][ 3 ]"),
            Ok(vec![Step::Index(-1), Step::Index(3)])
        );
        assert_eq!(
            parse(r#"$["a.b"]['c"d'].e"#),
            Ok(vec![key("a.b"), key("c\"d"), key("e")])
        );
        assert_eq!(parse(r#"$["q\"uote"]"#), Ok(vec![key("q\"uote")]));
        assert_eq!(parse("a.0"), Ok(vec![key("a"), key("0")]));
    }

    #[test]
    fn simple_path_errors_name_the_position() {
        assert_eq!(
            parse("a..b"),
            Err("expected a key name at position 3 in path \"a..b\"".into())
        );
        assert_eq!(
            parse("a."),
            Err("expected a key name at position 3 in path \"a.\"".into())
        );
        assert_eq!(
            parse("$x"),
            Err("expected '.' or '[' but found 'x' at position 2 in path \"$x\"".into())
        );
        assert!(
            parse("a[1")
                .unwrap_err()
                .starts_with("'[' without a matching ']' at position 2")
        );
        assert!(
            parse("a[x]")
                .unwrap_err()
                .starts_with("\"x\" is not an array index")
        );
        assert!(
            parse("a[\"x]")
                .unwrap_err()
                .starts_with("unterminated \"-quoted key")
        );
        assert!(
            parse("a['x'")
                .unwrap_err()
                .starts_with("expected ']' after the quoted key")
        );
    }

    #[test]
    fn lookups() {
        let document = json!({"a": {"b": [{"c": 1}, {"c": 2}], "x.y": true}, "": 0});
        let find = |path: &str| lookup(&document, &parse(path).unwrap()).cloned();
        assert_eq!(find("a.b[1].c"), Ok(json!(2)));
        assert_eq!(find("/a/b/0/c"), Ok(json!(1)));
        assert_eq!(find("a.b[-1]"), Ok(json!({"c": 2})));
        assert_eq!(find("a.b.0.c"), Ok(json!(1)));
        assert_eq!(find(r#"a["x.y"]"#), Ok(json!(true)));
        assert_eq!(find("/"), Ok(json!(0)));
        assert_eq!(find("$"), Ok(document.clone()));
        assert_eq!(
            find("a.z"),
            Err("$.a has no key \"z\"; its keys are b, x.y".into())
        );
        assert_eq!(
            find("a.b[2]"),
            Err("index 2 is out of range: $.a.b has 2 items".into())
        );
        assert_eq!(
            find("a.b[-3]"),
            Err("index -3 is out of range: $.a.b has 2 items".into())
        );
        assert_eq!(
            find("a.b.x"),
            Err("$.a.b is an array, so \"x\" must be an index".into())
        );
        assert_eq!(
            find("a[0]").unwrap_err(),
            "$.a is an object, not an array; use [\"0\"] for a key named 0"
        );
        assert_eq!(
            find("a.b[0].c.d"),
            Err("$.a.b[0].c is a number, which has no children".into())
        );
        assert_eq!(
            find(r#"a["x.y"].z"#),
            Err("$.a[\"x.y\"] is a boolean, which has no children".into())
        );
    }
}
