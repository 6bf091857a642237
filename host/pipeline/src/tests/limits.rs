//! Access rules and quotas, as layers.

use super::*;

/// Rules letting tenant acme call `echo`, and nobody anything else.
fn acme_only() -> Arc<wasm_agent_access::AccessRules> {
    let config = json!({
        "default": "deny",
        "rules": [{"name": "acme", "tenants": ["acme"], "tools": ["echo"], "effect": "allow"}],
    });
    let config = serde_json::from_value(config).unwrap();
    Arc::new(wasm_agent_access::AccessRules::new(config).unwrap())
}

#[tokio::test]
async fn a_request_is_held_to_the_access_rules_of_every_pipeline_it_passed() {
    let records = Arc::new(Records::default());
    let guarded = Pipeline::builder()
        .access(acme_only())
        .auditor(Some(records.clone()))
        .build();
    let open = Pipeline::builder().build();
    let target = Echo::new();
    let echo = tool(&target, CallSettings::default());
    let acme = CallContext::new().user("alice").tenant("acme");
    let called = guarded.call(call(&echo, json!({}), &acme)).await;
    assert!(called.result.is_ok(), "{:?}", called.result);
    // Refused as unknown before its arguments are read (they are bad).
    let globex = CallContext::new().user("carol").tenant("globex");
    let refused = guarded.call(call(&echo, json!({"bad": 1}), &globex)).await;
    let error = refused.result.unwrap_err();
    assert_eq!(error.kind, ErrorKind::UnknownTool, "{error:?}");
    let decided: Vec<_> = records
        .reports()
        .into_iter()
        .map(|r| r.decided_by)
        .collect();
    assert_eq!(
        decided,
        [
            Some("access: allow by rule 1 \"acme\"".to_string()),
            Some("access: deny by the default".to_string())
        ]
    );
    // Work done for carol after a guarded call (a delegated agent's run on
    // a pipeline of its own, without rules) is held to them still.
    let mut served = globex.clone();
    served.held_to(guarded.access().clone());
    let delegated = served.delegated();
    assert!(!open.allows(&delegated, "echo"));
    assert!(open.allows(&acme.delegated(), "echo"));
    let refused = open.call(call(&echo, json!({}), &delegated)).await;
    assert_eq!(refused.result.unwrap_err().kind, ErrorKind::UnknownTool);
    assert_eq!(target.runs(), 1);
}

#[tokio::test]
async fn a_call_that_passed_access_rules_carries_them_to_the_calls_made_for_it() {
    let probe = Arc::new(Gate::open());
    let echo = Tool {
        name: "echo".into(),
        target: probe.clone(),
        settings: CallSettings::default(),
    };
    let acme = CallContext::new().tenant("acme");
    let pipeline = Pipeline::builder().access(acme_only()).build();
    assert!(
        pipeline
            .call(call(&echo, json!({}), &acme))
            .await
            .result
            .is_ok()
    );
    assert_eq!(*probe.saw_rules.lock().unwrap(), Some(true));
    Pipeline::builder()
        .build()
        .call(call(&echo, json!({}), &acme))
        .await;
    assert_eq!(*probe.saw_rules.lock().unwrap(), Some(false));
}

fn quotas(text: serde_json::Value) -> Arc<wasm_agent_access::quota::Quotas> {
    let config = serde_json::from_value(text).unwrap();
    Arc::new(wasm_agent_access::quota::Quotas::new(config).unwrap())
}

#[tokio::test]
async fn a_tenant_over_its_rate_is_refused_saying_when_to_retry_and_others_are_not() {
    let records = Arc::new(Records::default());
    let limits = quotas(json!({"tenant": {"calls_per_minute": 60, "burst": 2}}));
    let pipeline = Pipeline::builder()
        .quotas(limits, None)
        .auditor(Some(records.clone()))
        .build();
    let target = Echo::new();
    let echo = tool(&target, CallSettings::default());
    let acme = CallContext::new().user("alice").tenant("acme");
    for _ in 0..2 {
        assert!(
            pipeline
                .call(call(&echo, json!({}), &acme))
                .await
                .result
                .is_ok()
        );
    }
    let refused = pipeline.call(call(&echo, json!({}), &acme)).await;
    let error = refused.result.unwrap_err();
    assert_eq!(error.kind, ErrorKind::RateLimited);
    assert!(
        error.message.starts_with(
            "tenant \"acme\" is over its quota of 60 calls per minute (burst 2, [quotas] \
             calls_per_minute); retry after "
        ),
        "{}",
        error.message
    );
    // Another tenant, and a call a tool makes for acme, are not held up.
    let globex = CallContext::new().tenant("globex");
    assert!(
        pipeline
            .call(call(&echo, json!({}), &globex))
            .await
            .result
            .is_ok()
    );
    assert_eq!(target.runs(), 3);
    let last = records.reports().pop().unwrap();
    assert_eq!(last.decided_by, None);
    let refusal = &records.reports()[2];
    assert_eq!(
        refusal.decided_by.as_deref(),
        Some("quota: tenant \"acme\" calls_per_minute")
    );
    assert_eq!(pipeline.quota_fallbacks(), 0);
}

#[tokio::test]
async fn calls_in_flight_are_held_until_they_end() {
    let limits = quotas(json!({"principals": {"alice": {"in_flight": 1}}}));
    let pipeline = Pipeline::builder().quotas(limits, None).build();
    let gate = Arc::new(Gate::closed());
    let slow = Tool {
        name: "slow".into(),
        target: gate.clone(),
        settings: CallSettings::default(),
    };
    let alice = CallContext::new().user("alice");
    let first = tokio::spawn({
        let (pipeline, call) = (pipeline.clone(), call(&slow, json!({}), &alice));
        async move { pipeline.call(call).await }
    });
    // Once the first runs (holding its place), the second is refused.
    while gate.saw_rules.lock().unwrap().is_none() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let second = pipeline.call(call(&slow, json!({}), &alice)).await;
    let error = second.result.unwrap_err();
    assert_eq!(error.kind, ErrorKind::RateLimited);
    assert!(
        error
            .message
            .contains("principal \"alice\" has 1 calls in flight"),
        "{}",
        error.message
    );
    gate.notify.as_ref().unwrap().notify_one();
    assert!(first.await.unwrap().result.is_ok());
    let third = tokio::spawn({
        let (pipeline, call) = (pipeline.clone(), call(&slow, json!({}), &alice));
        async move { pipeline.call(call).await }
    });
    // A permit left before the third waits is taken when it does.
    gate.notify.as_ref().unwrap().notify_one();
    assert!(
        third.await.unwrap().result.is_ok(),
        "its place was given back"
    );
}

/// A tool that answers at once (open) or once notified (closed), noting
/// whether its call carried access rules.
struct Gate {
    notify: Option<tokio::sync::Notify>,
    saw_rules: Mutex<Option<bool>>,
}

impl Gate {
    fn open() -> Self {
        Self {
            notify: None,
            saw_rules: Mutex::new(None),
        }
    }

    fn closed() -> Self {
        Self {
            notify: Some(tokio::sync::Notify::new()),
            ..Self::open()
        }
    }
}

#[async_trait::async_trait]
impl Target for Gate {
    fn version(&self) -> Option<String> {
        Some("v1".into())
    }
    fn check(&self, _: &Value) -> Result<String, CallError> {
        Ok("v1".into())
    }
    fn describe(&self, _: &mut CallReport) {}
    async fn run(&self, call: Running<'_>, _: &str) -> Run {
        *self.saw_rules.lock().unwrap() = Some(call.context.access_rules().is_some());
        if let Some(notify) = &self.notify {
            notify.notified().await;
        }
        Ok(ToolOutput::from("done")).into()
    }
}
