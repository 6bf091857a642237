//! Code mode: sandboxed code calls the host's other tools with
//! `host.call-tool`, only those its policy grants, on the path a direct call
//! takes, bounded in number and depth, and cancelled with its call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasm_agent::pipeline::{HostTools, Pipeline, PipelineCaller};
use wasm_agent::{
    CallContext, ErrorKind, LoadOptions, Policy, ToolCallResult, ToolEvent, ToolHost,
};

use crate::common::{component, host};
use crate::polyglot::polyglot;

/// A host with the calculator, the JSON tools and the fixture, and the two
/// interpreters granted `grant`.
async fn code_host(grant: &[&str]) -> ToolHost {
    let host = host();
    for name in ["calculator", "json", "fixture_tool"] {
        host.load(component(name), Policy::default()).await.unwrap();
    }
    for name in ["run_python", "run_javascript"] {
        let mut policy = Policy::default();
        for pattern in grant {
            policy = policy.allow_call_tool(*pattern);
        }
        host.load_with(polyglot(name), LoadOptions::new(policy).name(name))
            .await
            .unwrap();
    }
    host
}

/// Runs `code` with the host's tools as what it may call (through the
/// call pipeline, as every entry point's calls).
async fn run(host: &ToolHost, tool: &str, code: &str, context: CallContext) -> ToolCallResult {
    let tools = HostTools::new(host.clone(), Default::default());
    let caller = PipelineCaller::new(Pipeline::builder().build(), Arc::new(tools), "test");
    let context = context.tool_caller(Arc::new(caller));
    host.call(tool, &json!({ "code": code }).to_string(), &context)
        .await
}

#[tokio::test]
async fn code_calls_two_granted_tools_and_gets_their_results() {
    let host = code_host(&["calculate", "json_*"]).await;
    let python = "doubled = tools.calculate(expression='21 * 2')\n\
                  name = tools.json_query(document='{\"user\": {\"name\": \"ada\"}}', path='user.name')\n\
                  f'{name} {int(doubled) + 1}'";
    let result = run(&host, "run_python", python, CallContext::new()).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(result.content.contains("ada"), "{}", result.content);
    assert!(result.content.contains("43"), "{}", result.content);
    let listed = run(&host, "run_python", "sorted(tools)", CallContext::new()).await;
    assert_eq!(
        listed.content, "value:\n['calculate', 'json_format', 'json_query', 'json_summarize']",
        "only the granted tools are offered"
    );

    let js = "const a = await tools.calculate({ expression: '6 * 7' });\n\
              const b = tools.json_query({ document: '[1, 2, 3]', path: '[2]' });\n\
              return `${a} ${b}`";
    let result = run(&host, "run_javascript", js, CallContext::new()).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(result.content.contains("42 3"), "{}", result.content);
    // The tools object behaves as an object: no tool is called for
    // `toJSON`, `toString` or `then`.
    let js = "const t = await tools;\nreturn `${JSON.stringify(t)} ${String(t)} ${Object.keys(t).join(',')}`";
    let result = run(&host, "run_javascript", js, CallContext::new()).await;
    assert_eq!(
        result.content,
        "value:\n\"{} [object Object] calculate,json_format,json_query,json_summarize\"",
        "{result:?}"
    );
}

#[tokio::test]
async fn an_ungranted_tool_is_capability_denied() {
    let host = code_host(&["calculate"]).await;
    for (tool, code) in [
        ("run_python", "tools.json_query(document='{}', path='a')"),
        (
            "run_javascript",
            "tools.json_query({ document: '{}', path: 'a' })",
        ),
    ] {
        let result = run(&host, tool, code, CallContext::new()).await;
        let error = result.error.expect("refused");
        assert_eq!(error.kind, ErrorKind::CapabilityDenied, "{tool}: {error}");
        assert!(
            error.message.contains("--allow-call-tool json_query"),
            "{tool}: {error}"
        );
    }
    // The script can catch the refusal and go on; its kind is the host's.
    let caught = "try:\n    tools.json_query(document='{}', path='a')\n\
                  except ToolCallError as e:\n    print(e.error_kind)";
    let result = run(&host, "run_python", caught, CallContext::new()).await;
    assert!(result.content.contains("capability_denied"), "{result:?}");
    // Without a caller (an embedder that set none) nothing can be called.
    let bare = host
        .call(
            "run_python",
            &json!({"code": "tools"}).to_string(),
            &CallContext::new(),
        )
        .await;
    assert_eq!(bare.content, "value:\n<tools: none granted>", "{bare:?}");
}

#[tokio::test]
async fn called_tools_keep_their_own_checks_and_limits() {
    let host = code_host(&["*"]).await;
    // The called tool's schema is checked as for a direct call.
    let code =
        "try:\n    tools.calculate(expr='1')\nexcept ToolCallError as e:\n    print(e.error_kind)";
    let result = run(&host, "run_python", code, CallContext::new()).await;
    assert!(result.content.contains("invalid_arguments"), "{result:?}");
    // A tool called by a tool may not call tools: the interpreter called
    // from the other interpreter sees none.
    let code = "tools.run_python({ code: 'sorted(tools)' })";
    let result = run(&host, "run_javascript", code, CallContext::new()).await;
    assert!(result.content.contains("[]"), "{result:?}");
    // At most 64 calls per call.
    let code = "n = 0\ntry:\n    while True:\n        tools.calculate(expression='1')\n        n += 1\n\
                except ToolCallError as e:\n    print(n, e.error_kind, e.detail)";
    let result = run(&host, "run_python", code, CallContext::new()).await;
    assert!(
        result.content.contains("64 capability_denied"),
        "{result:?}"
    );
    assert!(result.content.contains("at most 64"), "{result:?}");
    // A tool is not offered itself, and may not call itself.
    let code = "print('run_python' in list(tools))\ntools.run_python(code='1')";
    let result = run(&host, "run_python", code, CallContext::new()).await;
    let error = result.error.expect("refused");
    assert!(error.message.contains("False"), "{error}");
    assert!(error.message.contains("may not call itself"), "{error}");
}

#[tokio::test]
async fn cancelling_the_call_stops_the_script_and_its_inner_call() {
    let host = code_host(&["sleep"]).await;
    let mut events = host.subscribe();
    let context = CallContext::new();
    let cancel = context.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = run(&host, "run_python", "tools.sleep(ms=30000)", context).await;
    assert_eq!(result.error.map(|e| e.kind), Some(ErrorKind::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_inner_call_cancelled(&mut events, "sleep");
}

/// Asserts that the last call of `tool` among `events` ended cancelled.
pub fn assert_inner_call_cancelled(
    events: &mut tokio::sync::broadcast::Receiver<ToolEvent>,
    tool: &str,
) {
    let mut inner = None;
    while let Ok(event) = events.try_recv() {
        if let ToolEvent::Finished {
            tool: name, error, ..
        } = event
            && name == tool
        {
            inner = Some(error);
        }
    }
    assert_eq!(
        inner,
        Some(Some(ErrorKind::Cancelled)),
        "the inner call of {tool} ended cancelled"
    );
}

#[test]
fn the_cli_loads_the_tools_a_script_calls_with_with() {
    let python = polyglot("run_python").display().to_string();
    let calculator = component("calculator").display().to_string();
    let code = json!({"code": "float(tools.calculate(expression='6 * 7')) / 2"}).to_string();
    let granted = crate::common::run(&[
        "call",
        &python,
        "run_python",
        &code,
        "--with",
        &calculator,
        "--allow-call-tool",
        "calculate",
    ]);
    assert!(
        granted.status.success(),
        "{}",
        crate::common::stderr(&granted)
    );
    assert_eq!(crate::common::stdout(&granted).trim(), "value:\n21.0");
    // Without the grant the same script is refused, naming it.
    let refused =
        crate::common::run(&["call", &python, "run_python", &code, "--with", &calculator]);
    crate::common::assert_clean_failure(&refused, 1, "--allow-call-tool calculate");
}
