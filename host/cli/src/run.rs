//! `wasm-agent run`: an agent over the loaded tools, streamed to the terminal.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use wasm_agent::agent::config::{AgentConfig, RouterKind};
use wasm_agent::agent::{
    Agent, AgentError, AgentEvent, AgentTool, ApproveTools, CodeMode, LexicalRouter, ModelRouter,
    RunOptions, RunOutput, StopReason, ToolCallRecord, ToolRouter,
};
use wasm_agent::ask::{Asker, Asking, SessionAnswers};
use wasm_agent::cache::ResultCache;
use wasm_agent::mcp_client::RemoteServer;
use wasm_agent::provider::{HttpProvider, Message, ModelSpec, Provider};
use wasm_agent::session::{Owner, SessionStore};
use wasm_agent::{CallContext, CancellationToken, ToolHost};

use super::args::RunArgs;
use super::code_mode::CodeModeChoice;
use super::remote_tools;
use super::store::{open_cache, open_store};
use super::terminal::{TerminalAsker, read_line};
use super::{EXIT_CALL_FAILED, load_targets_adjusted};

/// Runs the agent once (PROMPT) or as a chat (no PROMPT).
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = args.host.load_config()?;
    let settings = match &config {
        Some(file) => AgentConfig::from_file(file)?,
        None => AgentConfig::default(),
    };
    let model = args
        .model
        .clone()
        .or_else(|| settings.model.clone())
        .context(
            "no model: pass --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini, \
             anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash, ollama:llama3.2) \
             or set `model` in the [agent] section of the config",
        )?;
    let base_url = args.base_url.clone().or_else(|| settings.base_url.clone());
    let spec: ModelSpec = model.parse()?;
    let provider = provider_for(&spec, base_url.as_deref())?;

    let code_mode = CodeModeChoice::of(args.code_mode.language.as_deref(), settings.code_mode)?;

    let store = open_store(&args.host, config.as_ref()).await?;
    let cache = open_cache(args.cache.as_deref(), config.as_ref())?;
    let host = if args.tools.is_empty() && config.is_none() {
        None
    } else {
        let grant_all = args.host.policy.call_tools.is_empty();
        let host = load_targets_adjusted(
            &args.tools,
            &args.host,
            config.as_ref(),
            store.clone(),
            Some("run"),
            |name, policy| {
                // Code mode's interpreter may call the run's tools, unless
                // the config or the flags say which.
                if grant_all && policy.call_tools.is_empty() && code_mode.may_run_with(name) {
                    policy.call_tools.push("*".into());
                }
            },
        )
        .await?;
        Some(host)
    };
    let code_mode = code_mode.resolve(host.as_ref())?;
    // Approvals and `ask` grants, here or from the remote servers, are asked
    // of the user at the terminal.
    let answers = Arc::new(SessionAnswers::new(
        args.host.ask.wait,
        args.host.ask.offer_session,
    ));
    let asker: Arc<dyn Asker> = Arc::new(TerminalAsker::new());
    let asking = Asking::new(asker.clone(), answers.clone());
    let servers = remote_tools::connect(&args.mcp, &settings, Some(asking)).await?;
    // Calls of remote tools go to the audit log the host's calls go to.
    let auditor = crate::audit::shared(&args.host.audit, config.as_ref(), "run")?;
    let agent = build_agent(
        &args,
        &settings,
        (&spec, provider),
        (host.as_ref(), &servers, code_mode),
        (store.clone(), cache, auditor),
        (
            crate::access::rules(config.as_ref())?,
            crate::access::quotas(config.as_ref())?,
        ),
    )?;
    // New, changed and removed remote tools reach the next run (or chat turn).
    let _in_step = remote_tools::keep_in_step(&servers, &agent, &settings);
    let interrupts = Interrupts::listen();

    let session = args.session.clone().unwrap_or_else(|| "default".into());
    // The conversation continues only in a session the operator named.
    let owner = Owner::new(args.tenant.as_deref(), args.user.as_deref());
    let mut history = match &args.session {
        Some(id) => load_history(&*store, &owner, id).await,
        None => Vec::new(),
    };
    let context = || {
        let mut context = CallContext::new()
            .session(session.clone())
            .asking(Asking::new(asker.clone(), answers.clone()))
            .budget(args.host.request_budget());
        context.user_id = args.user.clone();
        context.tenant_id = args.tenant.clone();
        context
    };

    let Some(prompt) = &args.prompt else {
        let saved = (&*store, &owner);
        let code = chat(&agent, &args, saved, history, context, &interrupts).await;
        remote_tools::close(&servers).await;
        return code;
    };
    let outcome = run_once(
        &agent,
        prompt,
        context(),
        history.clone(),
        &args,
        &interrupts,
    )
    .await;
    let code = match &outcome {
        Ok(output) => exit_code(output),
        // The run itself failed (the model could not be reached): exit 1,
        // as a failed call does; exit 2 stays for usage and config errors.
        Err(_) => ExitCode::from(EXIT_CALL_FAILED),
    };
    if let (Some(messages), Some(id)) = (conversation(&outcome), &args.session) {
        history = messages;
        save_history(&*store, &owner, id, &history).await;
    }
    remote_tools::close(&servers).await;
    Ok(code)
}

/// The conversation after a run, also when the model failed part-way.
fn conversation(outcome: &Result<RunOutput, AgentError>) -> Option<Vec<Message>> {
    match outcome {
        Ok(output) => Some(output.messages.clone()),
        Err(error) => error.partial().map(|partial| partial.messages.clone()),
    }
}

/// Ctrl-C cancels the run in progress; with none in progress it exits.
/// One listener for the whole process, so it works at every prompt.
#[derive(Clone, Default)]
struct Interrupts {
    current: Arc<std::sync::Mutex<Option<CancellationToken>>>,
}

impl Interrupts {
    fn listen() -> Self {
        let interrupts = Self::default();
        let current = interrupts.current.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let running = current
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match running {
                    Some(token) => token.cancel(),
                    None => std::process::exit(130),
                }
            }
        });
        interrupts
    }

    fn set(&self, token: Option<CancellationToken>) {
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = token;
    }
}

/// Reads prompts line by line until end of input or `/exit`.
async fn chat(
    agent: &Agent,
    args: &RunArgs,
    (store, owner): (&dyn SessionStore, &Owner),
    mut history: Vec<Message>,
    context: impl Fn() -> CallContext,
    interrupts: &Interrupts,
) -> anyhow::Result<ExitCode> {
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!("chatting with {}; /exit or Ctrl-D ends", agent.name());
    }
    let mut last = ExitCode::SUCCESS;
    loop {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let Some(line) = read_line().await? else {
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/exit" || line == "/quit" {
            break;
        }
        let outcome = run_once(agent, line, context(), history.clone(), args, interrupts).await;
        // A failed model request ends this turn, not the chat.
        last = match &outcome {
            Ok(output) => exit_code(output),
            Err(_) => ExitCode::from(EXIT_CALL_FAILED),
        };
        if let Some(messages) = conversation(&outcome) {
            history = messages;
            if let Some(id) = &args.session {
                save_history(store, owner, id, &history).await;
            }
        }
    }
    Ok(last)
}

/// One prompt: streamed to the terminal, or one JSON object with `--json`.
/// Errors are reported here; the caller only picks the exit code.
async fn run_once(
    agent: &Agent,
    prompt: &str,
    context: CallContext,
    history: Vec<Message>,
    args: &RunArgs,
    interrupts: &Interrupts,
) -> Result<RunOutput, AgentError> {
    // Ctrl-C stops the run and its in-flight sandboxed calls.
    interrupts.set(Some(context.cancellation.clone()));
    let options = RunOptions::new().context(context).history(history);
    let outcome = if args.json {
        agent.run(prompt, options).await
    } else {
        stream_to_terminal(agent, prompt, options).await
    };
    interrupts.set(None);
    match &outcome {
        Ok(output) if args.json => match serde_json::to_string(output) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("error: cannot print the run as JSON: {e}"),
        },
        Ok(output) => report_end(output),
        Err(error) => {
            eprintln!("error: {error}");
            if let Some(partial) = error.partial()
                && !partial.tool_calls.is_empty()
            {
                eprintln!(
                    "({} tool call(s) ran before the failure; the session keeps them)",
                    partial.tool_calls.len()
                );
            }
        }
    }
    outcome
}

async fn stream_to_terminal(
    agent: &Agent,
    prompt: &str,
    options: RunOptions,
) -> Result<RunOutput, wasm_agent::agent::AgentError> {
    let mut events = agent.stream(prompt, options);
    let mut stdout = std::io::stdout();
    let mut wrote_text = false;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::TextDelta(text) => {
                wrote_text = true;
                let _ = stdout.write_all(printable(&text, true).as_bytes());
                let _ = stdout.flush();
            }
            AgentEvent::ToolCallStarted {
                name, arguments, ..
            } => {
                if wrote_text {
                    println!();
                    wrote_text = false;
                }
                eprintln!(
                    "  [tool] {} {} …",
                    printable(&name, false),
                    short_arguments(&arguments)
                );
            }
            AgentEvent::ToolCallFinished(record) => {
                eprintln!("{}", describe_call(&record));
            }
            AgentEvent::Done(outcome) => {
                if wrote_text {
                    println!();
                }
                return *outcome;
            }
            AgentEvent::ToolProgress { progress, .. } => super::terminal::show_progress(&progress),
            AgentEvent::ApprovalRequested(_) => {}
        }
    }
    Err(wasm_agent::agent::AgentError::Aborted(
        "the run ended without a result".into(),
    ))
}

/// `  [tool] calculate  0.4 ms  ok`
fn describe_call(record: &ToolCallRecord) -> String {
    let status = match &record.error {
        None if record.cached => "ok (cached)".to_string(),
        None => match record.shortened {
            Some(how) => format!("ok ({how} for the model)"),
            None => "ok".to_string(),
        },
        Some(error) => format!("{}: {}", error.kind, printable(&error.message, false)),
    };
    format!(
        "  [tool] {}  {:.1} ms  {status}",
        printable(&record.name, false),
        record.duration.as_secs_f64() * 1000.0
    )
}

/// Arguments on one line: compact JSON when they parse, cut at 80 characters.
fn short_arguments(arguments: &str) -> String {
    let full = serde_json::from_str::<serde_json::Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.to_string());
    let mut short: String = printable(&full, false).chars().take(80).collect();
    if full.chars().count() > 80 {
        short.push('…');
    }
    short
}

/// Text from a model or tool, safe to print: control characters (terminal
/// escapes that could fake an `[approval]` line, say) are shown escaped.
fn printable(text: &str, keep_newlines: bool) -> String {
    if keep_newlines {
        wasm_agent::text::multi_line(text).into_owned()
    } else {
        wasm_agent::text::one_line(text).into_owned()
    }
}

fn report_end(output: &RunOutput) {
    match output.stop_reason {
        StopReason::Answered => {}
        StopReason::MaxToolRoundtrips => eprintln!(
            "stopped: the model still wanted tools after {} roundtrips (raise --max-roundtrips)",
            output.roundtrips
        ),
        StopReason::Cancelled => eprintln!("cancelled"),
    }
    let usage = output.usage;
    eprintln!(
        "usage: {} prompt + {} completion = {} tokens; {} tool call(s) in {} roundtrip(s)",
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
        output.tool_calls.len(),
        output.roundtrips
    );
}

fn exit_code(output: &RunOutput) -> ExitCode {
    match output.stop_reason {
        StopReason::Answered => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_CALL_FAILED),
    }
}

fn provider_for(spec: &ModelSpec, base_url: Option<&str>) -> anyhow::Result<Arc<dyn Provider>> {
    Ok(Arc::new(HttpProvider::new(spec, base_url)?))
}

/// A helper model (summarizer, router). It shares the main model's base URL
/// only when it is of the same provider: an `openai:` summarizer beside an
/// `openai-compatible:` main model must not send the OpenAI key there.
fn helper_model(
    text: &str,
    main: &ModelSpec,
    base_url: Option<&str>,
) -> anyhow::Result<Arc<dyn Provider>> {
    let spec: ModelSpec = text.parse()?;
    let base_url = base_url.filter(|_| spec.kind == main.kind);
    provider_for(&spec, base_url)
}

/// Where a run keeps state, results and its audit trail.
type Keeping = (
    Arc<dyn SessionStore>,
    Arc<dyn ResultCache>,
    Option<Arc<wasm_agent::audit::AuditLog>>,
);

fn build_agent(
    args: &RunArgs,
    settings: &AgentConfig,
    (spec, provider): (&ModelSpec, Arc<dyn Provider>),
    (host, servers, code_mode): (Option<&ToolHost>, &[RemoteServer], Option<CodeMode>),
    (store, cache, auditor): Keeping,
    (access, (quotas, quota_store)): (
        Arc<wasm_agent::access::AccessRules>,
        crate::access::QuotaSettings,
    ),
) -> anyhow::Result<Agent> {
    let mut tools = host.map(AgentTool::all_from).unwrap_or_default();
    let remote = remote_tools::tools(servers, &tools)?;
    tools.extend(remote);
    for (name, tool_settings) in &settings.tools {
        match tools.iter_mut().find(|t| t.name() == name) {
            Some(tool) => tool.settings = tool_settings.apply_to(tool.settings.clone()),
            None => tracing::warn!("[calls.{name}] names a tool that is not loaded"),
        }
    }
    let mut builder = Agent::builder("wasm-agent")
        .model(provider.clone())
        .tools(tools)
        .session_store(store)
        .result_cache(cache)
        .access(access)
        .quotas(quotas, quota_store)
        .approval_handler(Arc::new(ApproveTools::named(args.approve.iter().cloned())));
    if let Some(mode) = code_mode {
        builder = builder.code_mode(mode);
    }
    if let Some(log) = auditor {
        builder = builder.auditor(log);
    }
    if let Some(instructions) = args.instructions.clone().or(settings.instructions.clone()) {
        builder = builder.instructions(instructions);
    }
    if let Some(n) = args.max_roundtrips.or(settings.max_tool_roundtrips) {
        builder = builder.max_tool_roundtrips(n);
    }
    if let Some(n) = args.parallel.or(settings.parallel_tool_calls) {
        builder = builder.parallel_tool_calls(n);
    }
    if let Some(n) = settings.max_tokens {
        builder = builder.max_tokens(n);
    }
    let base_url = args.base_url.as_deref().or(settings.base_url.as_deref());
    if let Some(summarizer) = &settings.summarizer {
        builder = builder.summarizer(helper_model(summarizer, spec, base_url)?);
    }
    if let Some(router) = &settings.router {
        if router.kind == RouterKind::Lexical && router.model.is_some() {
            anyhow::bail!("[agent] router: `model` is only used with kind = \"model\"");
        }
        if router.min_tools > router.max_tools {
            anyhow::bail!(
                "[agent] router: min_tools ({}) is larger than max_tools ({})",
                router.min_tools,
                router.max_tools
            );
        }
        let chosen: Arc<dyn ToolRouter> = match router.kind {
            RouterKind::Lexical => Arc::new(LexicalRouter),
            RouterKind::Model => Arc::new(ModelRouter::new(match &router.model {
                Some(model) => helper_model(model, spec, base_url)?,
                None => provider,
            })),
        };
        builder = builder.router(chosen, router.max_tools, router.min_tools);
    }
    Ok(builder.build()?)
}

async fn load_history(store: &dyn SessionStore, owner: &Owner, session: &str) -> Vec<Message> {
    match store.load_history(owner, session).await {
        Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!(
                "session {session}: stored conversation unreadable ({e}); starting afresh"
            );
            Vec::new()
        }),
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!("session {session}: {e}; starting afresh");
            Vec::new()
        }
    }
}

async fn save_history(store: &dyn SessionStore, owner: &Owner, session: &str, history: &[Message]) {
    let saved = match serde_json::to_string(history) {
        Ok(text) => store
            .save_history(owner, session, &text)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = saved {
        eprintln!("warning: session {session}: cannot save the conversation: {e}");
    }
}
