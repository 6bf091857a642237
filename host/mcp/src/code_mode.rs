//! The server's code mode (`serve --code-mode`): clients see one tool,
//! `run_code`, the interpreter, whose description lists the tools its code
//! may call (those its policy grants) as functions; those tools are called
//! from the code only, down the same pipeline with the client's identity.

use wasm_agent_access::Who;
use wasm_agent_code_mode::{Interpreter, Listed, RUN_CODE, describe};
use wasm_agent_pipeline::{Tool, ToolSet};
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::CallError;

use super::server::Shared;

impl Shared {
    /// Whether `who` may see and call the host's tool `name`.
    fn allowed(&self, who: &Who<'_>, name: &str) -> bool {
        self.pipeline.access().allows(who, name)
    }

    /// The interpreter code mode runs on for `who`: the first of the
    /// configured ones that is loaded and that it may call (`None` when
    /// code mode is off or there is none).
    fn interpreter(&self, who: &Who<'_>) -> Option<&(String, Interpreter)> {
        self.code_mode
            .iter()
            .find(|(tool, _)| self.host.has_tool(tool) && self.allowed(who, tool))
    }

    /// What `tools/list` shows `who`: the tools it may call, or in code
    /// mode `run_code` alone, listing those as functions (nothing while no
    /// interpreter it may call is loaded).
    pub(crate) fn listing(&self, who: &Who<'_>) -> Vec<ToolInfo> {
        let mut tools = self.host.tools();
        tools.retain(|tool| self.allowed(who, &tool.name));
        if self.code_mode.is_empty() {
            return tools;
        }
        let Some((interpreter, kind)) = self.interpreter(who) else {
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

    /// The tool a `tools/call` of `name` by `who` calls, if it is offered
    /// to it. In code mode `run_code` goes down the pipeline by its
    /// interpreter's name, which access rules, approvals and records name.
    pub(crate) fn offered(&self, name: &str, who: &Who<'_>) -> Option<Tool> {
        let name = match self.code_mode.is_empty() {
            true => name,
            false if name == RUN_CODE => &self.interpreter(who)?.0,
            false => return None,
        };
        if !self.allowed(who, name) {
            return None;
        }
        self.tools.tool(name)
    }

    /// The host's name of the tool `who` calls `name` (in code mode,
    /// `run_code` is the interpreter).
    pub(crate) fn host_name<'a>(&'a self, name: &'a str, who: &Who<'_>) -> &'a str {
        match self.interpreter(who) {
            Some((interpreter, _)) if name == RUN_CODE => interpreter,
            _ => name,
        }
    }

    /// The error of a `tools/call` of a name not offered to `who`: the
    /// words of a name that does not exist, listing what it may call.
    pub(crate) fn not_offered(&self, name: &str, who: &Who<'_>) -> CallError {
        let listed = self.listing(who);
        let names = listed.iter().map(|tool| tool.name.as_str());
        wasm_agent_sandbox::specs::unknown_tool(name, names)
    }
}
