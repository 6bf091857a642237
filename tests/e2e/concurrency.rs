//! Many calls at once: a looping tool must not hold up the others.

use std::time::{Duration, Instant};

use crate::common::{cache_dir, component, fixture_host};
use wasm_agent::{CallContext, ErrorKind, LoadOptions, Policy, ToolHost};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_calls_with_one_looping_all_others_finish_first() {
    let spin_timeout = Duration::from_secs(3);
    let host = fixture_host(Policy::default().timeout(spin_timeout)).await;
    let started = Instant::now();
    let spinner = tokio::spawn({
        let host = host.clone();
        async move { host.call("spin", "{}", &CallContext::new()).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let calls: Vec<_> = (0..99)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move {
                let result = host
                    .call(
                        "echo",
                        &format!(r#"{{"text":"call {i}"}}"#),
                        &CallContext::new(),
                    )
                    .await;
                (i, result, started.elapsed())
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for call in calls {
        let (i, result, finished_at) = call.await.unwrap();
        assert_eq!(result.content, format!("call {i}"), "{result:?}");
        slowest = slowest.max(finished_at);
    }
    assert!(
        !spinner.is_finished(),
        "the spinner ended before the others"
    );
    assert!(
        slowest < spin_timeout,
        "the others waited for the spinner: {slowest:?}"
    );
    let spun = spinner.await.unwrap();
    assert_eq!(spun.error.map(|e| e.kind), Some(ErrorKind::Timeout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_calls_timeout_never_interrupts_another() {
    let host = fixture_host(Policy::default().timeout(Duration::from_millis(300))).await;
    host.load_with(
        crate::common::component("fixture_tool"),
        wasm_agent::LoadOptions::new(Policy::default().timeout(Duration::from_secs(10)))
            .name("slow")
            .prefix("slow_"),
    )
    .await
    .unwrap();
    let long = tokio::spawn({
        let host = host.clone();
        async move {
            host.call("slow_sleep", r#"{"ms": 1000}"#, &CallContext::new())
                .await
        }
    });
    let short = host.call("spin", "{}", &CallContext::new()).await;
    assert_eq!(short.error.map(|e| e.kind), Some(ErrorKind::Timeout));
    let long = long.await.unwrap();
    assert_eq!(long.content, "slept", "{long:?}");
}

/// A call's answer does not wait for its instance to be freed (dropping it
/// resets its memory, 0.1 ms for an interpreter): the instance goes once
/// the caller's task next waits, and its slot is free only then, so one
/// slot serves call after call and never holds two instances (beside the
/// one made ahead for the next call).
#[tokio::test(flavor = "current_thread")]
async fn an_answer_comes_before_its_instance_is_freed_and_the_slot_after_it() {
    let host = ToolHost::builder()
        .cache_dir(cache_dir())
        .max_concurrency(1)
        .build()
        .expect("host builds");
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(Policy::default()).name("fixture"),
    )
    .await
    .expect("fixture loads");
    // The calls' instances: not the one made ahead for the next call.
    let alive = || {
        let pool = host.gauges().pool().expect("instances are pooled here");
        pool.component_instances - pool.made_ahead
    };
    for round in 0..3 {
        let answer = host
            .call("echo", r#"{"text": "hi"}"#, &CallContext::new())
            .await;
        assert!(answer.error.is_none(), "round {round}: {:?}", answer.error);
        assert_eq!(alive(), 1, "round {round}: the answer came first");
        tokio::task::yield_now().await;
        assert_eq!(alive(), 0, "round {round}: freed once the caller waited");
    }
}
