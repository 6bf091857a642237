//! Code mode: instead of every tool's schema, the model is offered one
//! `run_code` tool, a sandboxed interpreter (`run_monty`, `run_python` or
//! `run_javascript`) whose description lists the run's other tools as
//! functions its code can call. A task of several dependent steps then
//! takes one model roundtrip instead of one per step, and every request
//! carries one schema instead of all of them. Python runs on Monty by
//! default: its scripts pause at each tool call and hold no instance while
//! the call runs.
//!
//! What the code may call is still the interpreter's policy (`call_tools`);
//! each call it makes takes the path of the model's own calls (validation,
//! approval, cache, events) through the run's tool caller.

pub use wasm_agent_code_mode::{Interpreter, Language, Listed, RUN_CODE, describe};

use super::AgentError;
use super::tool::{AgentTool, Runner};

/// Code mode's settings: the interpreter and the tool that runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeMode {
    kind: Interpreter,
    interpreter: String,
}

impl CodeMode {
    /// Python on Monty, through the `run_monty` tool.
    pub fn python() -> Self {
        Self::with(Interpreter::Monty)
    }

    /// Python on CPython, through the `run_python` tool.
    pub fn cpython() -> Self {
        Self::with(Interpreter::CPython)
    }

    /// JavaScript through the `run_javascript` tool.
    pub fn javascript() -> Self {
        Self::with(Interpreter::JavaScript)
    }

    /// `language` through its default interpreter.
    pub fn new(language: Language) -> Self {
        Self::with(language.interpreter())
    }

    /// `kind` through its usual tool.
    pub fn with(kind: Interpreter) -> Self {
        Self {
            kind,
            interpreter: kind.tool().to_string(),
        }
    }

    /// Runs the code with the tool named `tool` instead (one loaded with a
    /// prefix or under another name).
    pub fn interpreter(mut self, tool: impl Into<String>) -> Self {
        self.interpreter = tool.into();
        self
    }

    /// The language.
    pub fn language(&self) -> Language {
        self.kind.language()
    }

    /// The interpreter.
    pub fn kind(&self) -> Interpreter {
        self.kind
    }

    /// The interpreter tool's name.
    pub fn interpreter_name(&self) -> &str {
        &self.interpreter
    }

    /// The `run_code` tool of a run with `tools`: the interpreter, renamed,
    /// with a description listing the tools its policy lets it call.
    pub(crate) fn run_code_tool(&self, tools: &[AgentTool]) -> Result<AgentTool, AgentError> {
        let interpreter = tools
            .iter()
            .find(|tool| tool.name == self.interpreter)
            .ok_or_else(|| {
                AgentError::BadTool(format!(
                    "code mode runs {} code with tool {:?}, which this agent does not have; \
                     load the interpreter component (run_monty.wasm, run_python.wasm or \
                     run_javascript.wasm)",
                    self.language(),
                    self.interpreter
                ))
            })?;
        let Runner::Sandboxed { host, tool } = &interpreter.runner else {
            return Err(AgentError::BadTool(format!(
                "code mode needs a sandboxed interpreter; tool {:?} is a host tool",
                self.interpreter
            )));
        };
        let callable: Vec<&AgentTool> = tools
            .iter()
            .filter(|other| other.name != interpreter.name && host.may_call(tool, &other.name))
            .collect();
        if callable.is_empty() {
            tracing::warn!(
                interpreter = %self.interpreter,
                "code mode: the interpreter's policy lets it call none of the run's tools \
                 (grant them with call_tools or --allow-call-tool)"
            );
        }
        let mut run_code = interpreter.clone();
        run_code.name = RUN_CODE.to_string();
        let listed: Vec<Listed<'_>> = callable
            .iter()
            .map(|tool| Listed {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            })
            .collect();
        run_code.description = describe(self.kind, &listed);
        Ok(run_code)
    }
}
