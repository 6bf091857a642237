//! `/healthz` and `/readyz` of `wasm-agent serve --http`: no token needed,
//! readiness false while the session store is down and from the moment a
//! SIGTERM arrives, while calls in flight finish.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::component;
use crate::mcp::{Server, path};
use crate::postgres::Postgres;

async fn get(url: &str) -> (StatusCode, String) {
    let response = reqwest::Client::new()
        .get(url)
        .header("host", "10.1.2.3:8080")
        .send()
        .await
        .expect("answered");
    let status = response.status();
    (
        status,
        response.text().await.unwrap().trim_end().to_string(),
    )
}

async fn ready_within(url: &str, expected: StatusCode) -> String {
    for _ in 0..100 {
        let (status, text) = get(url).await;
        if status == expected {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{url} never answered {expected}");
}

#[tokio::test(flavor = "multi_thread")]
async fn probes_need_no_token_and_follow_the_store() {
    let cluster = Postgres::start();
    let fixture = path(&component("fixture_tool"));
    let url = cluster.url();
    let server = Server::start(&["--tools", &fixture, "--token", "s3cret", "--store", &url]);
    assert_eq!(
        get(&server.at("/healthz")).await,
        (StatusCode::OK, "ok".into())
    );
    ready_within(&server.at("/readyz"), StatusCode::OK).await;
    // The gate still guards /mcp: the probe's Host is refused there.
    assert_eq!(get(&server.at("/mcp")).await.0, StatusCode::FORBIDDEN);
    let posted = reqwest::Client::new()
        .post(server.at("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::METHOD_NOT_ALLOWED);

    cluster.stop();
    let why = ready_within(&server.at("/readyz"), StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(why, "not ready: the session store does not answer");
    assert!(!why.contains("postgres"), "{why}");
    assert_eq!(get(&server.at("/healthz")).await.0, StatusCode::OK);
    cluster.resume();
    ready_within(&server.at("/readyz"), StatusCode::OK).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_turns_readiness_off_at_once_and_lets_calls_finish() {
    let fixture = path(&component("fixture_tool"));
    let mut server = Server::start(&["--tools", &fixture, "--metrics-addr", "127.0.0.1:0"]);
    let health = server
        .health
        .clone()
        .expect("--metrics-addr prints its address");
    let health = health.trim_end_matches("/readyz").to_string();
    ready_within(&format!("{health}/readyz"), StatusCode::OK).await;
    let (status, _) = get(&format!("{health}/mcp")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let session = server.session(None).await;
    let slow = server
        .call_tool_request(&session, 7, "sleep", json!({"ms": 1500}))
        .send();
    let slow = tokio::spawn(async move { slow.await.unwrap().text().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: kill(2) on our own child's pid.
    let pid = i32::try_from(server.child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let why = ready_within(&format!("{health}/readyz"), StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(why, "not ready: the server is stopping");
    let answered = slow.await.unwrap();
    assert!(answered.contains("\"isError\":false"), "{answered}");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_pass_the_host_check_on_either_listener_and_probes_do_not_need_it() {
    let fixture = path(&component("fixture_tool"));
    let with_host = async |url: &str, host: &str| {
        let response = reqwest::Client::new()
            .get(url)
            .header("host", host)
            .send()
            .await
            .expect("answered");
        (response.status(), response.text().await.unwrap())
    };
    for separate in [false, true] {
        let mut args = vec!["--tools", fixture.as_str()];
        if separate {
            args.extend(["--metrics-addr", "127.0.0.1:0"]);
        }
        let server = Server::start(&args);
        let base = match &server.health {
            Some(health) => health.trim_end_matches("/readyz").to_string(),
            None => server.at(""),
        };
        let dialled = base.trim_start_matches("http://").to_string();
        // A DNS-rebinding page sends its own name: refused, nothing told.
        let (status, text) = with_host(&format!("{base}/metrics"), "evil.example").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "separate={separate}: {text}");
        assert!(!text.contains("wasm_agent_"), "{text}");
        // The address the scraper dialled, and loopback names, are served.
        for host in [dialled.as_str(), "localhost"] {
            let (status, text) = with_host(&format!("{base}/metrics"), host).await;
            assert_eq!(status, StatusCode::OK, "separate={separate} {host}: {text}");
            assert!(text.contains("wasm_agent_tool_calls_in_flight"), "{text}");
        }
        // Probes come with a load balancer's Host and need no check.
        let (status, _) = with_host(&format!("{base}/healthz"), "evil.example").await;
        assert_eq!(status, StatusCode::OK, "separate={separate}");
    }
}
