//! `wasm-agent run --code-mode`: which interpreter runs the model's code,
//! and which component is granted calls of the run's tools.

use wasm_agent::ToolHost;
use wasm_agent::agent::{CodeMode, Interpreter, Language};

/// `--code-mode[=LANGUAGE]` or `[agent] code_mode`, before the tools are loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeModeChoice {
    Off,
    /// Whichever interpreter is loaded (Monty, then CPython, then JavaScript).
    Auto,
    /// The language's interpreters, in order of preference (Python: Monty,
    /// then CPython).
    Language(Language),
    /// This interpreter only (`--code-mode=monty` or `cpython`).
    Interpreter(Interpreter),
}

impl CodeModeChoice {
    pub fn of(flag: Option<&str>, config: Option<Language>) -> anyhow::Result<Self> {
        Ok(match (flag, config) {
            (Some(text), _) => {
                match text.to_ascii_lowercase().as_str() {
                    "auto" => Self::Auto,
                    "monty" => Self::Interpreter(Interpreter::Monty),
                    "cpython" => Self::Interpreter(Interpreter::CPython),
                    _ => Self::Language(text.parse().map_err(|e| {
                        anyhow::anyhow!("--code-mode: {e} (or monty, cpython, auto)")
                    })?),
                }
            }
            (None, Some(language)) => Self::Language(language),
            (None, None) => Self::Off,
        })
    }

    /// The interpreters this choice may run with, in order of preference.
    fn candidates(self) -> &'static [Interpreter] {
        match self {
            Self::Off => &[],
            Self::Auto => &[
                Interpreter::Monty,
                Interpreter::CPython,
                Interpreter::JavaScript,
            ],
            Self::Language(Language::Python) => &[Interpreter::Monty, Interpreter::CPython],
            Self::Language(Language::JavaScript) => &[Interpreter::JavaScript],
            Self::Interpreter(Interpreter::Monty) => &[Interpreter::Monty],
            Self::Interpreter(Interpreter::CPython) => &[Interpreter::CPython],
            Self::Interpreter(Interpreter::JavaScript) => &[Interpreter::JavaScript],
        }
    }

    /// The interpreters, with their tools, in order of preference.
    pub fn interpreters(self) -> Vec<(String, Interpreter)> {
        self.candidates()
            .iter()
            .map(|kind| (kind.tool().to_string(), *kind))
            .collect()
    }

    /// Grants the interpreters among `targets` calls of every tool, unless
    /// the flags (`grant_all` false) or their config name which.
    pub fn grant(self, targets: &mut [crate::components::Target], grant_all: bool) {
        for target in targets {
            if grant_all && target.policy.call_tools.is_empty() && self.may_run_with(&target.name) {
                target.policy.call_tools.push("*".into());
            }
        }
    }

    /// Refuses a choice none of `targets` can run with, naming the files.
    pub fn check(self, targets: &[crate::components::Target]) -> anyhow::Result<()> {
        if self == Self::Off || targets.iter().any(|t| self.may_run_with(&t.name)) {
            return Ok(());
        }
        Err(self.missing())
    }

    fn missing(self) -> anyhow::Error {
        let files: Vec<String> = self
            .candidates()
            .iter()
            .map(|kind| format!("{}.wasm", kind.tool()))
            .collect();
        anyhow::anyhow!(
            "code mode needs an interpreter tool: load {} with --tools (make setup builds \
             run_monty.wasm into target/wasm32-wasip2/release, the others into target/polyglot)",
            files.join(" or ")
        )
    }

    /// Whether the component (or config alias) called `name` may be the interpreter.
    pub fn may_run_with(self, name: &str) -> bool {
        self.candidates().iter().any(|kind| kind.tool() == name)
    }

    /// The code mode of the run, now that the tools are loaded.
    pub fn resolve(self, host: Option<&ToolHost>) -> anyhow::Result<Option<CodeMode>> {
        if self == Self::Off {
            return Ok(None);
        }
        let loaded = |kind: &&Interpreter| host.is_some_and(|h| h.has_tool(kind.tool()));
        if let Some(kind) = self.candidates().iter().find(loaded) {
            return Ok(Some(CodeMode::with(*kind)));
        }
        Err(self.missing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_prefers_monty_and_cpython_is_chosen_by_name() {
        let python = CodeModeChoice::of(Some("python"), None).unwrap();
        assert!(python.may_run_with("run_monty") && python.may_run_with("run_python"));
        assert!(!python.may_run_with("run_javascript"));
        let cpython = CodeModeChoice::of(Some("CPython"), None).unwrap();
        assert!(cpython.may_run_with("run_python") && !cpython.may_run_with("run_monty"));
        let error = CodeModeChoice::of(Some("ruby"), None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--code-mode") && error.contains("cpython"),
            "{error}"
        );
        let error = python.resolve(None).unwrap_err().to_string();
        assert!(
            error.contains("run_monty.wasm or run_python.wasm"),
            "{error}"
        );
    }
}
