//! `wasm-agent call`: one call of one tool, down the same call pipeline as
//! every other entry point's (audit, argument check, approval, cache). The
//! tool named on the command line is approved by naming it; calls it makes
//! of other tools are calls like any other: approved with `--approve`, or
//! asked of the user at the terminal.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use wasm_agent::agent::config::call_settings;
use wasm_agent::approval::{ApprovalHandler, ApprovalRequest, ApproveTools};
use wasm_agent::ask::{Asking, SessionAnswers};
use wasm_agent::pipeline::{
    CallEvents, Called, HostTools, Pipeline, PipelineCaller, Progress, ToolCall,
};
use wasm_agent::{CallContext, CallError, ErrorKind};

use super::args::CallArgs;
use super::{EXIT_CALL_FAILED, audit, load_targets_with, output, read_arguments, store, terminal};

pub async fn call(args: CallArgs) -> anyhow::Result<ExitCode> {
    let CallArgs {
        component,
        tool,
        arguments,
        json,
        session,
        user,
        tenant,
        metadata,
        with,
        approve,
        host,
    } = args;
    let arguments = read_arguments(arguments)?;
    // Questions (approvals, `ask` grants) go to the user at the terminal.
    let answers = SessionAnswers::new(host.ask.wait, host.ask.offer_session);
    let asking = Asking::new(Arc::new(terminal::TerminalAsker::new()), Arc::new(answers));
    let mut context = CallContext::new()
        .session(session)
        .asking(asking)
        .budget(host.request_budget());
    context.user_id = user;
    context.tenant_id = tenant;
    if let Some(metadata) = metadata {
        context.metadata =
            serde_json::from_str(&metadata).context("--metadata must be a JSON object")?;
    }
    let config = host.load_config()?;
    let store = store::open_store(&host, config.as_ref()).await?;
    let targets: Vec<String> = std::iter::once(component).chain(with).collect();
    let tool_host =
        load_targets_with(&targets, &host, config.as_ref(), store, Some("call")).await?;
    let settings = match &config {
        Some(config) => call_settings(config)?,
        None => Default::default(),
    };
    let tools = HostTools::new(tool_host, settings);
    let (quotas, quota_store) = crate::access::quotas(config.as_ref())?;
    let pipeline = Pipeline::builder()
        .access(crate::access::rules(config.as_ref())?)
        .quotas(quotas, quota_store)
        .result_cache(store::open_cache(None, config.as_ref())?)
        .approval_handler(Arc::new(CommandLine {
            named: tool.clone(),
            approved: ApproveTools::named(approve),
        }))
        .build();
    // Ctrl-C stops the call cleanly instead of killing the host.
    let cancellation = context.cancellation.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancellation.cancel();
        }
    });
    let caller = PipelineCaller::new(pipeline.clone(), Arc::new(tools.clone()), "call");
    let context = context.tool_caller(Arc::new(caller));
    let called = match (pipeline.tool(&tools, &tool, &context), parse(&arguments)) {
        (Err(unknown), _) => Called::new(Err(unknown), "call"),
        (_, Err(error)) => Called::new(Err(error), "call"),
        (Ok(found), Ok(arguments)) => {
            let call = ToolCall::new(found, "call", arguments, context);
            pipeline.call(call.events(Arc::new(Terminal))).await
        }
    };
    let result = called.into_result(&tool);
    // Failing closed, a call whose record cannot be written shows no result.
    audit::flush()?;
    output::print_call(&result, json)?;
    Ok(if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CALL_FAILED)
    })
}

/// The argument text as JSON.
fn parse(text: &str) -> Result<Value, CallError> {
    serde_json::from_str(text).map_err(|e| {
        CallError::new(
            ErrorKind::InvalidArguments,
            format!("the arguments are not valid JSON: {e}"),
        )
    })
}

/// What the user at the terminal sees of the call while it runs.
struct Terminal;

impl CallEvents for Terminal {
    fn progress(&self, progress: Progress) {
        terminal::show_progress(&progress);
    }
}

/// Approvals under `call`: the tool named on the command line (the operator
/// asked for exactly that call), and the tools `--approve` names.
struct CommandLine {
    named: String,
    approved: ApproveTools,
}

#[async_trait::async_trait]
impl ApprovalHandler for CommandLine {
    async fn approve(&self, request: &ApprovalRequest) -> bool {
        request.tool == self.named || self.approved.covers(&request.tool)
    }

    fn decided_by(&self, tool: &str) -> String {
        if tool == self.named {
            "the operator (named it on the command line)".into()
        } else if self.approved.covers(tool) {
            "the operator (--approve)".into()
        } else {
            "the operator's approvals (--approve)".into()
        }
    }
}
