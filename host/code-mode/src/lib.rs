//! # wasm-agent-code-mode
//!
//! Code mode's text: instead of every tool's schema, a model is offered one
//! interpreter tool (`run_code`) whose description lists the other tools as
//! functions its code can call, with signatures made from their schemas in
//! the interpreter's own spelling (Monty's async functions, CPython's and
//! JavaScript's `tools.NAME`). The agent loop and the MCP server both offer
//! it; this crate knows nothing of either.

#![warn(missing_docs)]

use std::fmt::Write as _;
use std::str::FromStr;

use serde::Deserialize;
use serde_json::Value;

/// The name of the one tool the model is offered in code mode.
pub const RUN_CODE: &str = "run_code";

/// The longest tool description repeated in the `run_code` listing, in
/// characters (longer ones are cut at a sentence or word).
const MAX_DESCRIPTION_CHARS: usize = 240;

/// A tool as the listing shows it.
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its description (the first paragraph is shown, cut).
    pub description: &'a str,
    /// Its arguments' JSON Schema.
    pub parameters: &'a Value,
}

/// The language the model writes in code mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// CPython, with the tools as `tools.NAME(key=value)`.
    Python,
    /// JavaScript, with the tools as `tools.NAME({ key: value })`.
    #[serde(alias = "js")]
    JavaScript,
}

impl Language {
    /// The interpreter of this language code mode uses by default.
    pub fn interpreter(self) -> Interpreter {
        match self {
            Language::Python => Interpreter::Monty,
            Language::JavaScript => Interpreter::JavaScript,
        }
    }
}

/// An interpreter code mode can run the model's code with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpreter {
    /// Python on Monty (`run_monty`): tools are async functions, and the
    /// script pauses at each call, holding no instance while it runs.
    Monty,
    /// CPython (`run_python`): the full standard library; tools are
    /// `tools.NAME(...)`, called from inside the running instance.
    CPython,
    /// JavaScript (`run_javascript`).
    JavaScript,
}

impl Interpreter {
    /// Its tool among the example tools.
    pub fn tool(self) -> &'static str {
        match self {
            Interpreter::Monty => "run_monty",
            Interpreter::CPython => "run_python",
            Interpreter::JavaScript => "run_javascript",
        }
    }

    /// The language it runs.
    pub fn language(self) -> Language {
        match self {
            Interpreter::Monty | Interpreter::CPython => Language::Python,
            Interpreter::JavaScript => Language::JavaScript,
        }
    }
}

impl FromStr for Language {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "python" | "py" => Ok(Language::Python),
            "javascript" | "js" => Ok(Language::JavaScript),
            _ => Err(format!(
                "{text:?} is not a code-mode language: use python or javascript"
            )),
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Language::Python => "python",
            Language::JavaScript => "javascript",
        })
    }
}

/// What the model reads about the interpreter in code mode (`run_code`): how to use it, then each tool as
/// a function with its signature and a short description.
pub fn describe(kind: Interpreter, tools: &[Listed<'_>]) -> String {
    let mut text = match kind {
        Interpreter::Monty => String::from(
            "Run a Python script in a sandbox and get back what it prints and the value of \
             its last expression. The Python is Monty, a subset: no class inheritance, \
             generators, match or del; json, re, math, datetime and collections work. Do \
             whole tasks in one script: the tools below are async functions called with \
             keyword arguments: `x = await calculate(expression='2+2')`, several at once \
             with `await asyncio.gather(...)`. They exist already: never define them. Each returns the tool's result text \
             (json.loads it when it is JSON) and raises RuntimeError when the tool fails. \
             Print only what you need.",
        ),
        Interpreter::CPython => String::from(
            "Run Python 3 code in a sandbox and get back what it prints (stdout, then \
             stderr) and the value of its last expression. Do whole tasks in one script: \
             the tools below are functions of `tools`, called with keyword arguments; \
             each returns the tool's result text (json.loads it when it is JSON) and \
             raises ToolCallError when the tool fails. Print only what you need.",
        ),
        Interpreter::JavaScript => String::from(
            "Run JavaScript in a sandbox and get back what it logs (console.log) and the \
             value of its last expression (with top-level await, `return` the value). Do \
             whole tasks in one script: the tools below are functions of `tools`, called \
             with one object argument; each returns the tool's result text (JSON.parse it \
             when it is JSON) and throws ToolCallError when the tool fails. Log only what \
             you need.",
        ),
    };
    if tools.is_empty() {
        text.push_str("\n\nNo tools are available to the code.");
        return text;
    }
    text.push_str("\n\nTools:");
    for tool in tools {
        let _ = write!(
            text,
            "\n- {}\n  {}",
            signature(kind, tool.name, tool.parameters),
            short(tool.description)
        );
    }
    text
}

/// `await calculate(expression: str) -> str`,
/// `tools.calculate(expression: str) -> str` or
/// `tools.calculate({ expression: string }) -> string`.
fn signature(kind: Interpreter, name: &str, schema: &Value) -> String {
    let language = kind.language();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let parameters = properties.into_iter().flatten().map(|(key, property)| {
        let optional = !required.contains(&key.as_str());
        (key.as_str(), type_name(language, property), optional)
    });
    match language {
        Language::Python => {
            let mut listed = Vec::new();
            let mut odd_names = false;
            for (key, kind, optional) in parameters {
                if !is_identifier(key) {
                    odd_names = true;
                    continue;
                }
                listed.push(if optional {
                    format!("{key}: {kind} = None")
                } else {
                    format!("{key}: {kind}")
                });
            }
            if odd_names {
                listed.push("**arguments".into());
            }
            match (kind, is_identifier(name)) {
                (Interpreter::Monty, true) => {
                    format!("await {name}({}) -> str", listed.join(", "))
                }
                (Interpreter::Monty, false) => {
                    format!("await call_tool({name:?}, {{...}}) -> str")
                }
                (_, true) => format!("tools.{name}({}) -> str", listed.join(", ")),
                (_, false) => format!("tools[{name:?}]({}) -> str", listed.join(", ")),
            }
        }
        Language::JavaScript => {
            let fields: Vec<String> = parameters
                .map(|(key, kind, optional)| {
                    let key = if is_identifier(key) {
                        key.to_string()
                    } else {
                        format!("{key:?}")
                    };
                    format!("{key}{}: {kind}", if optional { "?" } else { "" })
                })
                .collect();
            let function = if is_identifier(name) {
                format!("tools.{name}")
            } else {
                format!("tools[{name:?}]")
            };
            if fields.is_empty() {
                format!("{function}() -> string")
            } else {
                format!("{function}({{ {} }}) -> string", fields.join(", "))
            }
        }
    }
}

/// A JSON Schema type as the language writes it.
fn type_name(language: Language, property: &Value) -> String {
    let one = |kind: &str| -> &'static str {
        match (language, kind) {
            (Language::Python, "string") => "str",
            (Language::Python, "integer") => "int",
            (Language::Python, "number") => "float",
            (Language::Python, "boolean") => "bool",
            (Language::Python, "array") => "list",
            (Language::Python, "object") => "dict",
            (Language::Python, "null") => "None",
            (Language::JavaScript, "string") => "string",
            (Language::JavaScript, "integer" | "number") => "number",
            (Language::JavaScript, "boolean") => "boolean",
            (Language::JavaScript, "array") => "array",
            (Language::JavaScript, "object") => "object",
            (Language::JavaScript, "null") => "null",
            (Language::Python, _) => "Any",
            (Language::JavaScript, _) => "any",
        }
    };
    let any = match language {
        Language::Python => "Any",
        Language::JavaScript => "any",
    };
    match property.get("type") {
        Some(Value::String(kind)) => one(kind).to_string(),
        Some(Value::Array(kinds)) => {
            let names: Vec<&str> = kinds.iter().filter_map(Value::as_str).map(one).collect();
            if names.is_empty() {
                any.to_string()
            } else {
                names.join(" | ")
            }
        }
        _ => any.to_string(),
    }
}

/// Whether `text` can be written as a name in both languages.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The first paragraph of a description, on one line, cut to
/// [`MAX_DESCRIPTION_CHARS`] at a sentence or word end.
fn short(description: &str) -> String {
    let paragraph = description.split("\n\n").next().unwrap_or_default();
    let line = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= MAX_DESCRIPTION_CHARS {
        return line;
    }
    let cut: String = line.chars().take(MAX_DESCRIPTION_CHARS).collect();
    match cut.rfind(". ") {
        Some(end) if end > MAX_DESCRIPTION_CHARS / 2 => cut[..=end].to_string(),
        _ => {
            let end = cut.rfind(' ').unwrap_or(cut.len());
            format!("{}…", &cut[..end])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "expression": {"type": "string"},
                "precision": {"type": ["integer", "null"]},
                "odd-key": {"type": "boolean"}
            },
            "required": ["expression"]
        })
    }

    #[test]
    fn signatures_follow_the_schema_in_each_language() {
        assert_eq!(
            signature(Interpreter::CPython, "calculate", &schema()),
            "tools.calculate(expression: str, precision: int | None = None, **arguments) -> str"
        );
        assert_eq!(
            signature(Interpreter::Monty, "calculate", &schema()),
            "await calculate(expression: str, precision: int | None = None, **arguments) -> str"
        );
        assert_eq!(
            signature(Interpreter::Monty, "json-query", &json!({})),
            "await call_tool(\"json-query\", {...}) -> str"
        );
        assert_eq!(
            signature(Interpreter::JavaScript, "calculate", &schema()),
            "tools.calculate({ expression: string, precision?: number | null, \"odd-key\"?: boolean }) -> string"
        );
        assert_eq!(
            signature(Interpreter::CPython, "json-query", &json!({})),
            "tools[\"json-query\"]() -> str"
        );
        assert_eq!(
            signature(Interpreter::JavaScript, "now", &json!({"type": "object"})),
            "tools.now() -> string"
        );
    }

    #[test]
    fn long_descriptions_are_cut_at_a_sentence() {
        let long = format!("{}. {}", "a".repeat(150), "b ".repeat(100));
        let cut = short(&long);
        assert_eq!(cut, format!("{}.", "a".repeat(150)));
        assert_eq!(short("One.\n\nTwo."), "One.");
        let words = "word ".repeat(100);
        let cut = short(&words);
        assert!(cut.ends_with('…') && cut.chars().count() <= MAX_DESCRIPTION_CHARS + 1);
    }

    #[test]
    fn languages_parse_from_their_names() {
        assert_eq!("Python".parse(), Ok(Language::Python));
        assert_eq!("js".parse(), Ok(Language::JavaScript));
        assert!(
            "ruby"
                .parse::<Language>()
                .unwrap_err()
                .contains("python or javascript")
        );
    }
}
