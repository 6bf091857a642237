//! The layers' promises, on a target of the tests' own (the end-to-end
//! tests hold them through every entry point with real components).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wasm_agent_cache::MemoryCache;
use wasm_agent_sandbox::approval::{Approval, ApprovalHandler, ApproveTools, DenyAll};
use wasm_agent_sandbox::ask::{Asker, Asking, Outcome, Question, Reply, SessionAnswers, Subject};
use wasm_agent_sandbox::context::{CallContext, ToolOutput};
use wasm_agent_sandbox::report::{CallAuditor, CallReport};
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::target::{Run, Running, Target};
use crate::{CallSettings, Pipeline, Tool, ToolCall};

/// A tool that echoes its arguments and who asked, counting its runs; its
/// version can be changed under it (a reload).
struct Echo {
    version: Mutex<String>,
    runs: AtomicUsize,
}

impl Echo {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            version: Mutex::new("sha256:v1".into()),
            runs: AtomicUsize::new(0),
        })
    }

    fn reload(&self, version: &str) {
        *self.version.lock().unwrap() = version.into();
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Target for Echo {
    fn version(&self) -> Option<String> {
        Some(self.version.lock().unwrap().clone())
    }

    fn check(&self, arguments: &Value) -> Result<String, CallError> {
        match arguments.get("bad") {
            Some(_) => Err(CallError::new(ErrorKind::InvalidArguments, "bad")),
            None => Ok(self.version.lock().unwrap().clone()),
        }
    }

    fn describe(&self, _: &mut CallReport) {}

    async fn run(&self, call: Running<'_>, version: &str) -> Run {
        if self.version().as_deref() != Some(version) {
            return Err(CallError::new(ErrorKind::Denied, "reloaded")).into();
        }
        self.runs.fetch_add(1, Ordering::SeqCst);
        let who = call.context.user_id.clone().unwrap_or_default();
        Ok(ToolOutput::from(format!("{who}:{}", call.arguments))).into()
    }
}

fn tool(target: &Arc<Echo>, settings: CallSettings) -> Tool {
    Tool {
        name: "echo".into(),
        target: target.clone(),
        settings,
    }
}

fn call(tool: &Tool, arguments: Value, context: &CallContext) -> ToolCall {
    ToolCall::new(tool.clone(), "c1", arguments, context.clone())
}

/// An auditor that keeps its reports and refuses calls while `down`.
#[derive(Default)]
struct Records {
    reports: Mutex<Vec<CallReport>>,
    down: AtomicBool,
}

impl CallAuditor for Records {
    fn admit(&self) -> Result<(), String> {
        match self.down.load(Ordering::SeqCst) {
            true => Err("the audit log cannot be written".into()),
            false => Ok(()),
        }
    }

    fn record(&self, report: CallReport) {
        self.reports.lock().unwrap().push(report);
    }
}

impl Records {
    fn reports(&self) -> Vec<CallReport> {
        self.reports.lock().unwrap().clone()
    }
}

fn cached_for(ttl_secs: u64) -> CallSettings {
    CallSettings {
        cache_ttl: Some(std::time::Duration::from_secs(ttl_secs)),
        ..CallSettings::default()
    }
}

#[tokio::test]
async fn a_cached_answer_is_recorded_and_refused_while_the_log_fails_closed() {
    let echo = Echo::new();
    let records = Arc::new(Records::default());
    let pipeline = Pipeline::builder().auditor(Some(records.clone())).build();
    let tool = tool(&echo, cached_for(60));
    let context = CallContext::new();
    let first = pipeline.call(call(&tool, json!({"a": 1}), &context)).await;
    let again = pipeline.call(call(&tool, json!({"a": 1}), &context)).await;
    assert!(!first.cached && again.cached, "{again:?}");
    assert_eq!(echo.runs(), 1);
    let reports = records.reports();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(!reports[0].cached && reports[1].cached);

    records.down.store(true, Ordering::SeqCst);
    let refused = pipeline.call(call(&tool, json!({"a": 1}), &context)).await;
    assert_eq!(refused.error_kind(), Some(ErrorKind::AuditUnavailable));
    assert!(!refused.cached);
    assert_eq!(echo.runs(), 1);
}

#[tokio::test]
async fn refusals_are_recorded_with_how_approval_went() {
    let echo = Echo::new();
    let records = Arc::new(Records::default());
    let pipeline = Pipeline::builder().auditor(Some(records.clone())).build();
    let settings = CallSettings {
        approval: Approval::Always,
        ..CallSettings::default()
    };
    let tool = tool(&echo, settings);
    let denied = pipeline
        .call(call(&tool, json!({"a": 1}), &CallContext::new()))
        .await;
    assert_eq!(denied.error_kind(), Some(ErrorKind::Denied));
    let invalid = pipeline
        .call(call(&tool, json!({"bad": 1}), &CallContext::new()))
        .await;
    assert_eq!(invalid.error_kind(), Some(ErrorKind::InvalidArguments));
    let reports = records.reports();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(reports[0].outcome, Some(ErrorKind::Denied));
    let note = reports[0].approval.as_ref().expect("approval recorded");
    assert_eq!(note.by, DenyAll.decided_by("echo"));
    assert_eq!(reports[1].outcome, Some(ErrorKind::InvalidArguments));
    assert_eq!(echo.runs(), 0);
}

#[tokio::test]
async fn cached_results_never_cross_principals_or_tenants() {
    let echo = Echo::new();
    let cache = Arc::new(MemoryCache::new(16));
    let pipeline = Pipeline::builder().result_cache(cache).build();
    let private = tool(&echo, cached_for(60));
    let as_who = |user: Option<&str>, tenant: Option<&str>| {
        let mut context = CallContext::new();
        context.user_id = user.map(str::to_string);
        context.tenant_id = tenant.map(str::to_string);
        context
    };
    let args = json!({"q": 1});
    for (user, tenant) in [
        (Some("alice"), None),
        (Some("bob"), None),
        (None, None),
        (Some("alice"), Some("acme")),
        (Some("bob"), Some("acme")),
    ] {
        let called = pipeline
            .call(call(&private, args.clone(), &as_who(user, tenant)))
            .await;
        assert!(!called.cached, "{user:?}/{tenant:?} got another's result");
        let content = called.result.unwrap().content;
        assert!(content.starts_with(user.unwrap_or("")), "{content}");
    }
    assert_eq!(echo.runs(), 5);
    let again = pipeline
        .call(call(
            &private,
            args.clone(),
            &as_who(Some("bob"), Some("acme")),
        ))
        .await;
    assert!(again.cached, "the same caller is served from the cache");

    // Declared shared: one result per tenant, whoever asks.
    let shared = tool(
        &echo,
        CallSettings {
            cache_shared: true,
            ..cached_for(60)
        },
    );
    let first = pipeline
        .call(call(
            &shared,
            args.clone(),
            &as_who(Some("alice"), Some("x")),
        ))
        .await;
    let other = pipeline
        .call(call(&shared, args.clone(), &as_who(Some("bob"), Some("x"))))
        .await;
    let tenant = pipeline
        .call(call(&shared, args.clone(), &as_who(Some("bob"), Some("y"))))
        .await;
    assert!(!first.cached && other.cached && !tenant.cached);
}

/// A person who answers every question with `reply`, noting each.
struct Person {
    reply: Reply,
    asked: Mutex<Vec<Question>>,
}

#[async_trait::async_trait]
impl Asker for Person {
    async fn ask(&self, question: &Question) -> Reply {
        self.asked.lock().unwrap().push(question.clone());
        self.reply
    }

    fn who(&self) -> String {
        "the person".into()
    }
}

#[tokio::test]
async fn allow_for_the_session_covers_exactly_the_arguments_and_version_asked_about() {
    let echo = Echo::new();
    let pipeline = Pipeline::builder().build();
    let tool = tool(
        &echo,
        CallSettings {
            approval: Approval::Always,
            ..CallSettings::default()
        },
    );
    let person = Arc::new(Person {
        reply: Reply::Session,
        asked: Mutex::default(),
    });
    let answers = Arc::new(SessionAnswers::new(std::time::Duration::from_secs(5), true));
    let context = CallContext::new().asking(Asking::new(person.clone(), answers));
    let padding = "x".repeat(400);
    let first = json!({"pad": padding, "command": "ls", "token": "one"});
    let outcomes = [
        // Asked, allowed for the session.
        (first.clone(), Outcome::AllowedForSession),
        // The same arguments in another key order: remembered.
        (
            json!({"token": "one", "command": "ls", "pad": padding}),
            Outcome::Remembered,
        ),
        // Different only after the first 300 characters: asked again.
        (
            json!({"pad": padding, "command": "rm -rf /", "token": "one"}),
            Outcome::AllowedForSession,
        ),
        // Different only in a redacted field: asked again.
        (
            json!({"pad": padding, "command": "ls", "token": "two"}),
            Outcome::AllowedForSession,
        ),
    ];
    for (arguments, expected) in outcomes {
        let called = pipeline
            .call(call(&tool, arguments.clone(), &context))
            .await;
        assert!(called.result.is_ok(), "{called:?}");
        let asked = called.approval.and_then(|note| note.asked);
        assert_eq!(asked, Some(expected), "{arguments}");
    }
    assert_eq!(person.asked.lock().unwrap().len(), 3);
    let shown = person.asked.lock().unwrap()[1].text();
    assert!(shown.contains("rm -rf /"), "{shown}");
    assert!(shown.contains("too long to show in full"), "{shown}");

    // A reloaded component is asked about again.
    echo.reload("sha256:v2");
    let reloaded = pipeline.call(call(&tool, first, &context)).await;
    let asked = reloaded.approval.and_then(|note| note.asked);
    assert_eq!(asked, Some(Outcome::AllowedForSession));
    let last = person.asked.lock().unwrap().last().cloned().unwrap();
    let Subject::Call { version, .. } = &last.subject else {
        panic!("{last:?}")
    };
    assert_eq!(version, "sha256:v2");
}

/// An operator's approval that reloads the tool while it decides.
struct ReloadingWhileDeciding(Arc<Echo>);

#[async_trait::async_trait]
impl wasm_agent_sandbox::approval::ApprovalHandler for ReloadingWhileDeciding {
    async fn approve(&self, request: &wasm_agent_sandbox::approval::ApprovalRequest) -> bool {
        assert_eq!(request.version, "sha256:v1");
        self.0.reload("sha256:v2");
        true
    }
}

#[tokio::test]
async fn an_approval_given_during_a_reload_never_runs_the_new_code() {
    let echo = Echo::new();
    let pipeline = Pipeline::builder()
        .approval_handler(Arc::new(ReloadingWhileDeciding(echo.clone())))
        .build();
    let settings = CallSettings {
        approval: Approval::Always,
        ..CallSettings::default()
    };
    let tool = tool(&echo, settings);
    let called = pipeline
        .call(call(&tool, json!({"a": 1}), &CallContext::new()))
        .await;
    assert_eq!(called.error_kind(), Some(ErrorKind::Denied), "{called:?}");
    assert_eq!(echo.runs(), 0);
}

#[tokio::test]
async fn nobody_to_ask_names_who_refused_and_how_to_allow() {
    let echo = Echo::new();
    let tool = tool(
        &echo,
        CallSettings {
            approval: Approval::Always,
            ..CallSettings::default()
        },
    );
    let refused = Pipeline::builder()
        .build()
        .call(call(&tool, json!({}), &CallContext::new()))
        .await;
    let message = refused.result.unwrap_err().message;
    assert!(message.contains("--approve echo"), "{message}");
    assert!(message.contains("did not approve"), "{message}");
    let allowed = Pipeline::builder()
        .approval_handler(Arc::new(ApproveTools::named(["echo"])))
        .build()
        .call(call(&tool, json!({}), &CallContext::new()))
        .await;
    assert!(allowed.result.is_ok());
}

#[tokio::test]
async fn a_call_dropped_while_waiting_for_approval_is_recorded_as_cancelled() {
    struct Never;
    #[async_trait::async_trait]
    impl wasm_agent_sandbox::approval::ApprovalHandler for Never {
        async fn approve(&self, _: &wasm_agent_sandbox::approval::ApprovalRequest) -> bool {
            std::future::pending().await
        }
    }
    let echo = Echo::new();
    let records = Arc::new(Records::default());
    let pipeline = Pipeline::builder()
        .auditor(Some(records.clone()))
        .approval_handler(Arc::new(Never))
        .build();
    let tool = tool(
        &echo,
        CallSettings {
            approval: Approval::Always,
            ..CallSettings::default()
        },
    );
    let waiting = pipeline.call(call(&tool, json!({}), &CallContext::new()));
    let timed_out = tokio::time::timeout(std::time::Duration::from_millis(50), waiting).await;
    assert!(timed_out.is_err());
    let reports = records.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].outcome, Some(ErrorKind::Cancelled));
}

/// A tool that takes 80 ms, reporting progress of its own or not.
struct Slow {
    reports: bool,
}

#[async_trait::async_trait]
impl Target for Slow {
    fn version(&self) -> Option<String> {
        Some("v1".into())
    }

    fn check(&self, _: &Value) -> Result<String, CallError> {
        Ok("v1".into())
    }

    fn describe(&self, _: &mut CallReport) {}

    fn reports_progress(&self) -> bool {
        self.reports
    }

    async fn run(&self, call: Running<'_>, _: &str) -> Run {
        if self.reports
            && let Some(events) = call.events
        {
            events.progress(crate::Progress {
                progress: 1.0,
                total: Some(2.0),
                message: None,
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        Ok(ToolOutput::from("done")).into()
    }
}

/// Keeps the progress reported.
#[derive(Default)]
struct Heard(Mutex<Vec<f64>>);

impl crate::CallEvents for Heard {
    fn progress(&self, progress: crate::Progress) {
        self.0.lock().unwrap().push(progress.progress);
    }
}

#[tokio::test]
async fn a_long_call_reports_the_time_it_has_run_unless_its_target_reports_progress() {
    let pipeline = Pipeline::builder()
        .progress_every(std::time::Duration::from_millis(20))
        .build();
    for reports in [false, true] {
        let tool = Tool {
            name: "slow".into(),
            target: Arc::new(Slow { reports }),
            settings: CallSettings::default(),
        };
        let heard = Arc::new(Heard::default());
        let call = ToolCall::new(tool, "c1", json!({}), CallContext::new()).events(heard.clone());
        let called = pipeline.call(call).await;
        assert!(called.result.is_ok());
        let heard = heard.0.lock().unwrap().clone();
        if reports {
            assert_eq!(heard, [1.0], "only the target's own reports");
        } else {
            assert!(heard.len() >= 2, "ticks every 20 ms of 80: {heard:?}");
            assert!(heard.windows(2).all(|w| w[0] < w[1]), "growing: {heard:?}");
        }
    }
}

mod limits;
mod operators;
