//! Network policy end to end: a real HTTP server on 127.0.0.1, the fixture
//! component making requests, and the host deciding what gets through.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

use crate::common::fixture_host;
use wasm_agent::{ByteSize, CallContext, ErrorKind, Policy, ToolCallResult, ToolHost};

/// What the test server does for every request.
#[derive(Clone, Copy)]
enum Behaviour {
    Hello,
    RedirectTo(SocketAddr),
    Huge(usize),
    NeverAnswer,
    /// An HTML page at `/` and an Open-Meteo-compatible API under `/v1/`.
    Site,
}

/// A real HTTP/1.1 server on loopback counting the connections it accepts.
struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let (counter, seen) = (connections.clone(), authorizations.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            if let Some(value) = request.headers().get("authorization") {
                                seen.lock()
                                    .unwrap()
                                    .push(value.to_str().unwrap().to_string());
                            }
                            Ok::<_, Infallible>(respond(behaviour, &request).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Server {
            addr,
            connections,
            authorizations,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn grant(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn respond(
    behaviour: Behaviour,
    request: &Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    match behaviour {
        Behaviour::Hello => Response::new(Full::new(Bytes::from(format!(
            "hello from {}",
            request.uri().path()
        )))),
        Behaviour::RedirectTo(to) => Response::builder()
            .status(302)
            .header("location", format!("http://{to}/elsewhere"))
            .body(Full::new(Bytes::new()))
            .unwrap(),
        Behaviour::Huge(bytes) => Response::new(Full::new(Bytes::from(vec![b'x'; bytes]))),
        Behaviour::Site => site(request),
        Behaviour::NeverAnswer => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Response::new(Full::new(Bytes::new()))
        }
    }
}

fn policy(grants: &[String]) -> Policy {
    grants
        .iter()
        .fold(Policy::default().timeout(Duration::from_secs(5)), |p, g| {
            p.allow_host(g.parse().unwrap())
        })
}

async fn get(host: &ToolHost, url: &str) -> ToolCallResult {
    host.call(
        "http_get",
        &json!({ "url": url }).to_string(),
        &CallContext::new(),
    )
    .await
}

fn kind(result: &ToolCallResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

#[tokio::test]
async fn a_granted_request_gets_the_body() {
    let server = Server::start(Behaviour::Hello).await;
    let host = fixture_host(policy(&[server.grant()])).await;
    let result = get(&host, &server.url("/page")).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(result.content, "200\nhello from /page");
}

#[tokio::test]
async fn a_host_port_or_scheme_not_granted_is_denied_before_connecting() {
    let server = Server::start(Behaviour::Hello).await;
    let port = server.addr.port();
    for grants in [
        vec![],
        vec![format!("http://127.0.0.2:{port}")],
        vec![format!("http://127.0.0.1:{}", port.wrapping_add(1).max(1))],
        vec![format!("https://127.0.0.1:{port}")],
    ] {
        let host = fixture_host(policy(&grants)).await;
        let result = get(&host, &server.url("/")).await;
        assert_eq!(
            kind(&result),
            Some(ErrorKind::CapabilityDenied),
            "{grants:?}: {result:?}"
        );
        let message = result.error.unwrap().message;
        assert!(message.contains(&server.url("/")), "{message}");
        assert!(message.contains("not in the policy"), "{message}");
    }
    assert_eq!(
        server.connections(),
        0,
        "a denied request reached the server"
    );
}

#[tokio::test]
async fn a_name_resolving_to_loopback_needs_the_ip_granted() {
    let server = Server::start(Behaviour::Hello).await;
    let port = server.addr.port();
    let by_name = format!("http://localhost:{port}");
    let host = fixture_host(policy(std::slice::from_ref(&by_name))).await;
    let result = get(&host, &format!("http://localhost:{port}/")).await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::CapabilityDenied),
        "{result:?}"
    );
    assert!(result.error.unwrap().message.contains("loopback"));
    assert_eq!(server.connections(), 0);

    let host = fixture_host(policy(&[by_name, server.grant()])).await;
    let result = get(&host, &format!("http://localhost:{port}/ok")).await;
    assert_eq!(result.content, "200\nhello from /ok", "{result:?}");
}

#[tokio::test]
async fn redirects_are_not_followed_and_the_next_hop_is_checked() {
    let elsewhere = Server::start(Behaviour::Hello).await;
    let redirector = Server::start(Behaviour::RedirectTo(elsewhere.addr)).await;
    let host = fixture_host(policy(&[redirector.grant()])).await;
    let result = get(&host, &redirector.url("/")).await;
    assert!(result.content.starts_with("302"), "{result:?}");
    let followed = get(&host, &elsewhere.url("/elsewhere")).await;
    assert_eq!(
        kind(&followed),
        Some(ErrorKind::CapabilityDenied),
        "{followed:?}"
    );
    assert_eq!(elsewhere.connections(), 0);
}

#[tokio::test]
async fn an_oversized_response_is_cut_at_the_limit() {
    let server = Server::start(Behaviour::Huge(5 * 1024 * 1024)).await;
    let host = fixture_host(policy(&[server.grant()]).max_response(ByteSize::mib(1))).await;
    let result = get(&host, &server.url("/")).await;
    assert_eq!(kind(&result), Some(ErrorKind::Failed), "{result:?}");
    let message = result.error.unwrap().message.to_lowercase();
    assert!(
        message.contains("large") || message.contains("limit"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_call_deadline() {
    let server = Server::start(Behaviour::NeverAnswer).await;
    let host = fixture_host(policy(&[server.grant()]).timeout(Duration::from_millis(700))).await;
    let result = get(&host, &server.url("/")).await;
    assert_eq!(kind(&result), Some(ErrorKind::Timeout), "{result:?}");
    assert!(
        result.duration < Duration::from_millis(800),
        "{:?}",
        result.duration
    );
}

#[tokio::test]
async fn the_request_cap_is_enforced() {
    let server = Server::start(Behaviour::Hello).await;
    let host = fixture_host(policy(&[server.grant()]).max_requests(0)).await;
    let result = get(&host, &server.url("/")).await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::CapabilityDenied),
        "{result:?}"
    );
    assert!(result.error.unwrap().message.contains("max_requests"));
}

#[tokio::test]
async fn raw_tcp_reaches_only_granted_addresses() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let host = fixture_host(policy(&[format!("tcp://{addr}")])).await;
    let args = json!({ "addr": addr.to_string() }).to_string();
    let result = host.call("tcp_connect", &args, &CallContext::new()).await;
    assert_eq!(result.content, "connected", "{result:?}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the granted connection did not arrive"
    );

    let udp = host.call("udp_send", &args, &CallContext::new()).await;
    assert_eq!(kind(&udp), Some(ErrorKind::CapabilityDenied), "{udp:?}");
    assert!(udp.error.unwrap().message.contains("udp"));
}

#[tokio::test]
async fn credential_headers_reach_the_server_but_never_the_guest() {
    let server = Server::start(Behaviour::Hello).await;
    let key = "WASM_AGENT_E2E_TOKEN";
    // SAFETY: only this test reads or writes this variable.
    unsafe { std::env::set_var(key, "tok-3141") };
    // A plain-http server: the pattern states that cleartext is intended.
    let policy = policy(&[server.grant()]).http_header(
        "http://127.0.0.1",
        "Authorization",
        format!("Bearer ${{{key}}}"),
    );
    let host = fixture_host(policy).await;
    let args = json!({"method": "GET", "url": server.url("/me"), "headers": {"authorization": "guest-value"}});
    let result = host
        .call("http_request", &args.to_string(), &CallContext::new())
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(*server.authorizations.lock().unwrap(), ["Bearer tok-3141"]);
    assert!(
        !result.content.contains("tok-3141"),
        "the guest saw the credential: {}",
        result.content
    );
    let env = host.call("env", "{}", &CallContext::new()).await;
    assert!(!env.content.contains("tok-3141"));
}

#[tokio::test]
async fn credential_headers_are_not_sent_over_plain_http_unless_stated() {
    let server = Server::start(Behaviour::Hello).await;
    let policy =
        policy(&[server.grant()]).http_header("127.0.0.1", "Authorization", "Bearer secret-7");
    let host = fixture_host(policy).await;
    let args = json!({"method": "GET", "url": server.url("/me")});
    let result = host
        .call("http_request", &args.to_string(), &CallContext::new())
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert!(
        server
            .authorizations
            .lock()
            .unwrap()
            .iter()
            .all(|a| !a.contains("secret-7")),
        "a credential went out in cleartext"
    );
}

fn site(request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let query = request.uri().query().unwrap_or_default().to_string();
    let (content_type, body) = match request.uri().path() {
        "/v1/search" if query.contains("name=Atlantis") => ("application/json", json!({}).to_string()),
        "/v1/search" => (
            "application/json",
            json!({"results": [{"name": "Paris", "country": "France", "latitude": 48.85, "longitude": 2.35}]})
                .to_string(),
        ),
        "/v1/forecast" => (
            "application/json",
            json!({
                "current": {"time": "2026-11-30T12:00", "temperature_2m": 7.5, "wind_speed_10m": 11.0, "weather_code": 3},
                "current_units": {"temperature_2m": "°C", "wind_speed_10m": "km/h"}
            })
            .to_string(),
        ),
        _ => (
            "text/html; charset=utf-8",
            "<html><head><title>T</title><script>var secret = 1;</script></head>\
             <body><h1>Release notes</h1><p>Version <b>2.0</b> is out.</p></body></html>"
                .to_string(),
        ),
    };
    Response::builder()
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// Runs the CLI off the async runtime (the test server lives on it).
async fn cli(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::common::run(&args)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_returns_readable_text_of_a_granted_page() {
    let server = Server::start(Behaviour::Site).await;
    let fetch = crate::common::component("fetch")
        .to_string_lossy()
        .into_owned();
    let args = json!({"url": server.url("/notes")}).to_string();
    let output = cli(vec![
        "call".into(),
        fetch.clone(),
        "fetch".into(),
        args.clone(),
        "--allow-host".into(),
        server.grant(),
    ])
    .await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("Release notes") && text.contains("Version 2.0 is out"),
        "{text}"
    );
    assert!(!text.contains("secret") && !text.contains("<p>"), "{text}");

    let denied = cli(vec![
        "call".into(),
        fetch,
        "fetch".into(),
        args,
        "--json".into(),
    ])
    .await;
    let value: serde_json::Value = serde_json::from_slice(&denied.stdout).unwrap();
    assert_eq!(value["error"]["kind"], "capability_denied", "{value}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weather_uses_the_configured_api() {
    let server = Server::start(Behaviour::Site).await;
    let weather = crate::common::component("weather")
        .to_string_lossy()
        .into_owned();
    let base = format!("http://{}", server.addr);
    let run = |city: &str| {
        cli(vec![
            "call".into(),
            weather.clone(),
            "current_weather".into(),
            json!({"city": city}).to_string(),
            "--json".into(),
            "--allow-host".into(),
            server.grant(),
            "--dependency".into(),
            format!("geocoding_url={base}"),
            "--dependency".into(),
            format!("forecast_url={base}"),
        ])
    };
    let output = run("Paris").await;
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let content = value["content"].as_str().unwrap();
    assert!(
        content.contains("Paris, France") && content.contains("7.5"),
        "{value}"
    );
    assert!(
        !value["artifacts"].as_array().unwrap().is_empty(),
        "{value}"
    );
    let missing = run("Atlantis").await;
    let value: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(value["error"]["kind"], "failed", "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Atlantis"),
        "{value}"
    );
}

/// How each interpreter fetches (`URL` stands for the quoted address): the
/// status and body, as the result shows them; a refused request caught,
/// and what it prints; an uncaught one.
struct Fetching {
    tool: &'static str,
    get: &'static str,
    got: &'static str,
    caught: &'static str,
    printed: &'static str,
    uncaught: &'static str,
}

const FETCHING: [Fetching; 2] = [
    Fetching {
        tool: "run_python",
        get: "r = fetch(URL)\nf'{r.status} {r.text()}'",
        got: "value:\n'200 hello from /code'",
        caught: "try:\n    fetch(URL)\nexcept FetchError as e:\n    print(type(e).__name__)",
        printed: "stdout:\nFetchError",
        uncaught: "fetch(URL)",
    },
    Fetching {
        tool: "run_javascript",
        get: "const r = await fetch(URL);\nreturn `${r.status} ${await r.text()}`",
        got: "value:\n\"200 hello from /code\"",
        caught: "try { await fetch(URL); } catch (e) { console.log(e.name); }",
        printed: "stdout:\nTypeError",
        uncaught: "await fetch(URL)",
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interpreters_fetch_only_from_granted_hosts() {
    let granted = Server::start(Behaviour::Hello).await;
    let other = Server::start(Behaviour::Hello).await;
    for case in FETCHING {
        let host = crate::common::host();
        host.load_with(
            crate::polyglot::polyglot(case.tool),
            wasm_agent::LoadOptions::new(policy(&[granted.grant()])).name(case.tool),
        )
        .await
        .unwrap();
        let run = async |template: &str, url: String| {
            let code = template.replace("URL", &format!("{url:?}"));
            let arguments = json!({ "code": code }).to_string();
            host.call(case.tool, &arguments, &CallContext::new()).await
        };
        let result = run(case.get, granted.url("/code")).await;
        assert_eq!(result.content, case.got, "{}: {result:?}", case.tool);
        // Not granted: refused before connecting; caught, the code goes on.
        let result = run(case.caught, other.url("/")).await;
        assert_eq!(result.content, case.printed, "{}: {result:?}", case.tool);
        // Uncaught, the call is capability_denied naming the grant.
        let error = run(case.uncaught, other.url("/"))
            .await
            .error
            .expect("refused");
        assert_eq!(
            error.kind,
            ErrorKind::CapabilityDenied,
            "{}: {error}",
            case.tool
        );
        assert!(
            error
                .message
                .contains(&format!("--allow-host {}", other.grant())),
            "{}: {error}",
            case.tool
        );
    }
    assert_eq!(
        other.connections(),
        0,
        "nothing reached the ungranted server"
    );
}
