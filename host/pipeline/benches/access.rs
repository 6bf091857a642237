//! `make bench`: what the access and quota layers cost per call, side by
//! side in one run: a pipeline with no rules, with 50 rules (the deciding
//! one last), and with 50 rules and a tenant quota counted in memory (a
//! Redis round trip aside), on a target that answers at once. Median of 15
//! rounds of 20,000 calls each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_agent_access::AccessRules;
use wasm_agent_access::quota::Quotas;
use wasm_agent_access::{Credentials, Source};
use wasm_agent_pipeline::target::{Run, Running, Target};
use wasm_agent_pipeline::{CallSettings, Pipeline, Tool, ToolCall};
use wasm_agent_sandbox::budget::RequestBudget;
use wasm_agent_sandbox::context::{CallContext, ToolOutput};
use wasm_agent_sandbox::report::CallReport;
use wasm_agent_sandbox::result::CallError;

const CALLS: u32 = 20_000;
const ROUNDS: usize = 15;

/// Answers every call at once.
struct Nothing;

#[async_trait::async_trait]
impl Target for Nothing {
    fn version(&self) -> Option<String> {
        Some("v1".into())
    }
    fn check(&self, _: &Value) -> Result<String, CallError> {
        Ok("v1".into())
    }
    fn describe(&self, _: &mut CallReport) {}
    async fn run(&self, _: Running<'_>, _: &str) -> Run {
        Ok(ToolOutput::from("ok")).into()
    }
}

/// 49 rules that do not match, then the one that allows.
fn fifty_rules() -> Arc<AccessRules> {
    let mut rules: Vec<Value> = (0..49)
        .map(|n| {
            json!({"name": format!("other {n}"), "tenants": [format!("tenant-{n}")],
                   "claims": {"groups": "ops"}, "tools": [format!("tool_{n}_*")], "effect": "allow"})
        })
        .collect();
    rules.push(
        json!({"name": "acme", "tenants": ["acme"], "tools": ["lookup*"], "effect": "allow"}),
    );
    let config = serde_json::from_value(json!({"default": "deny", "rules": rules})).unwrap();
    Arc::new(AccessRules::new(config).unwrap())
}

async fn per_call(pipeline: &Pipeline, tool: &Tool, context: &CallContext) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS {
        // Each call a request of its own, with its own budget of calls.
        let context = context.clone().budget(RequestBudget::default());
        let call = ToolCall::new(tool.clone(), "b", json!({}), context);
        let called = pipeline.call(call).await;
        assert!(called.result.is_ok(), "{:?}", called.result);
    }
    started.elapsed() / CALLS
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tool = Tool {
        name: "lookup".into(),
        target: Arc::new(Nothing),
        settings: CallSettings::default(),
    };
    let context = CallContext::new()
        .user("alice")
        .tenant("acme")
        .credentials(Credentials::new(Source::Tokens));
    let quotas = serde_json::from_value(json!({"tenant": {"calls_per_minute": 1_000_000_000u32}}));
    let quotas = Arc::new(Quotas::new(quotas.unwrap()).unwrap());
    let pipelines = [
        ("no rules", Pipeline::builder().build()),
        (
            "50 rules",
            Pipeline::builder().access(fifty_rules()).build(),
        ),
        (
            "50 rules + quota (memory)",
            Pipeline::builder()
                .access(fifty_rules())
                .quotas(quotas, None)
                .build(),
        ),
    ];
    let mut medians = Vec::new();
    runtime.block_on(async {
        for (name, pipeline) in &pipelines {
            let mut rounds = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                rounds.push(per_call(pipeline, &tool, &context).await);
            }
            rounds.sort();
            medians.push((*name, rounds[ROUNDS / 2]));
        }
    });
    let floor = medians[0].1.as_secs_f64();
    println!(
        "\naccess and quotas: the pipeline per call, median of {ROUNDS} rounds of {CALLS} calls"
    );
    println!(
        "{:<28} {:>10} {:>14}",
        "pipeline", "per call", "over no rules"
    );
    for (name, median) in &medians {
        let over = median.as_secs_f64() - floor;
        println!(
            "{name:<28} {:>8.2} µs {:>11.2} µs",
            median.as_secs_f64() * 1e6,
            over * 1e6
        );
    }
}
