//! `wasm-agent run --code-mode`: which interpreter runs the model's code,
//! and which component is granted calls of the run's tools.

use wasm_agent::ToolHost;
use wasm_agent::agent::{CodeMode, Language};

/// `--code-mode[=LANGUAGE]` or `[agent] code_mode`, before the tools are loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeModeChoice {
    Off,
    /// Whichever interpreter is loaded (Python first).
    Auto,
    Language(Language),
}

impl CodeModeChoice {
    pub fn of(flag: Option<&str>, config: Option<Language>) -> anyhow::Result<Self> {
        Ok(match (flag, config) {
            (Some("auto"), _) => Self::Auto,
            (Some(text), _) => Self::Language(
                text.parse()
                    .map_err(|e| anyhow::anyhow!("--code-mode: {e}"))?,
            ),
            (None, Some(language)) => Self::Language(language),
            (None, None) => Self::Off,
        })
    }

    /// Whether the component (or config alias) called `name` may be the interpreter.
    pub fn may_run_with(self, name: &str) -> bool {
        let language = |l: Language| name == l.interpreter();
        match self {
            Self::Off => false,
            Self::Auto => language(Language::Python) || language(Language::JavaScript),
            Self::Language(l) => language(l),
        }
    }

    /// The code mode of the run, now that the tools are loaded.
    pub fn resolve(self, host: Option<&ToolHost>) -> anyhow::Result<Option<CodeMode>> {
        let loaded = |l: Language| host.is_some_and(|h| h.has_tool(l.interpreter()));
        let language = match self {
            Self::Off => return Ok(None),
            Self::Language(l) => l,
            Self::Auto if loaded(Language::Python) => Language::Python,
            Self::Auto if loaded(Language::JavaScript) => Language::JavaScript,
            Self::Auto => anyhow::bail!(
                "--code-mode needs an interpreter tool: load run_python.wasm or \
                 run_javascript.wasm with --tools (make setup builds them into target/polyglot)"
            ),
        };
        if !loaded(language) {
            anyhow::bail!(
                "code mode ({language}) needs the {} tool: load {}.wasm with --tools",
                language.interpreter(),
                language.interpreter()
            );
        }
        Ok(Some(CodeMode::new(language)))
    }
}
