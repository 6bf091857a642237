//! The server's code mode (`serve --code-mode`): clients see one tool,
//! `run_code`, the interpreter, whose description lists the tools its code
//! may call (those its policy grants) as functions; those tools are called
//! from the code only, down the same pipeline with the client's identity.

use wasm_agent_code_mode::{Interpreter, Listed, RUN_CODE, describe};
use wasm_agent_pipeline::{Tool, ToolSet};
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::CallError;

use super::server::Shared;

impl Shared {
    /// The interpreter code mode runs on now: the first of the configured
    /// ones that is loaded (`None` when code mode is off or none is).
    fn interpreter(&self) -> Option<&(String, Interpreter)> {
        self.code_mode
            .iter()
            .find(|(tool, _)| self.host.has_tool(tool))
    }

    /// What `tools/list` shows: every tool, or in code mode `run_code`
    /// alone (nothing while its interpreter is not loaded).
    pub(crate) fn listing(&self) -> Vec<ToolInfo> {
        let tools = self.host.tools();
        if self.code_mode.is_empty() {
            return tools;
        }
        let Some((interpreter, kind)) = self.interpreter() else {
            return Vec::new();
        };
        let Some(mut run_code) = tools.iter().find(|t| t.name == *interpreter).cloned() else {
            return Vec::new();
        };
        let callable: Vec<Listed<'_>> = tools
            .iter()
            .filter(|tool| self.host.may_call(interpreter, &tool.name))
            .map(|tool| Listed {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            })
            .collect();
        run_code.description = describe(*kind, &callable);
        run_code.name = RUN_CODE.into();
        vec![run_code]
    }

    /// The tool a `tools/call` of `name` calls, if it is offered.
    pub(crate) fn offered(&self, name: &str) -> Option<Tool> {
        if self.code_mode.is_empty() {
            return self.tools.tool(name);
        }
        let (interpreter, _) = self.interpreter()?;
        if name != RUN_CODE {
            return None;
        }
        let mut tool = self.tools.tool(interpreter)?;
        tool.name = RUN_CODE.into();
        Some(tool)
    }

    /// The host's name of the tool clients call `name` (in code mode,
    /// `run_code` is the interpreter).
    pub(crate) fn host_name<'a>(&'a self, name: &'a str) -> &'a str {
        match self.interpreter() {
            Some((interpreter, _)) if name == RUN_CODE => interpreter,
            _ => name,
        }
    }

    /// The error of a `tools/call` of a name not offered.
    pub(crate) fn not_offered(&self, name: &str) -> CallError {
        match self.code_mode.is_empty() {
            true => self.tools.unknown(name),
            false => wasm_agent_sandbox::specs::unknown_tool(name, [RUN_CODE].into_iter()),
        }
    }
}
