//! TEST-ONLY component for the host's tests: benign probes of every host
//! capability plus hostile behaviours (endless loops, unbounded allocation,
//! stack overflow, panics, floods). Never ship it.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use wasm_agent_guest::host::{self, Level};
use wasm_agent_guest::http::{self, Method};
use wasm_agent_guest::{Context, NoArgs, Output, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TextArgs {
    /// Text to return unchanged.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyValueArgs {
    key: String,
    /// Any JSON value.
    value: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EmitArgs {
    name: String,
    /// Any JSON value.
    payload: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogArgs {
    level: LogLevel,
    message: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WritePathArgs {
    path: String,
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecurseArgs {
    /// Stop after this many levels (default: never, i.e. overflow the stack).
    depth: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    message: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BytesArgs {
    bytes: usize,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddrArgs {
    /// `host:port`.
    addr: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpGetArgs {
    url: String,
    /// Largest body accepted, in bytes (default: the SDK's 10 MiB).
    max_body: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpRequestArgs {
    /// GET, POST, PUT, PATCH, DELETE or HEAD.
    method: String,
    url: String,
    headers: Option<BTreeMap<String, String>>,
    body: Option<String>,
}

fn echo(args: TextArgs, _: &Context) -> Result<String, ToolError> {
    Ok(args.text)
}

fn context(_: NoArgs, ctx: &Context) -> Result<String, ToolError> {
    let value = json!({
        "run_id": ctx.run_id,
        "session_id": ctx.session_id,
        "user_id": ctx.user_id,
        "tenant_id": ctx.tenant_id,
        "metadata": ctx.metadata,
    });
    Ok(value.to_string())
}

fn state_set(args: KeyValueArgs, _: &Context) -> Result<String, ToolError> {
    host::state::set(&args.key, &args.value)?;
    Ok("ok".into())
}

fn state_get(args: KeyArgs, _: &Context) -> Result<String, ToolError> {
    Ok(host::state::get_raw(&args.key).unwrap_or_else(|| "null".into()))
}

fn dependency(args: NameArgs, _: &Context) -> Result<String, ToolError> {
    Ok(host::dependency(&args.name).unwrap_or_else(|| "(none)".into()))
}

fn emit(args: EmitArgs, _: &Context) -> Result<String, ToolError> {
    host::emit(&args.name, &args.payload)?;
    Ok("emitted".into())
}

fn log(args: LogArgs, _: &Context) -> Result<String, ToolError> {
    let level = match args.level {
        LogLevel::Trace => Level::Trace,
        LogLevel::Debug => Level::Debug,
        LogLevel::Info => Level::Info,
        LogLevel::Warn => Level::Warn,
        LogLevel::Error => Level::Error,
    };
    host::log(level, &args.message);
    Ok("logged".into())
}

/// Arguments of `delegate`.
#[derive(Deserialize, JsonSchema)]
struct DelegateArgs {
    agent: String,
    input: String,
}

fn delegate(args: DelegateArgs, _: &Context) -> Result<String, ToolError> {
    host::delegate(&args.agent, &args.input)
}

fn cancelled(_: NoArgs, _: &Context) -> Result<String, ToolError> {
    Ok(host::cancelled().to_string())
}

fn artifacts(_: NoArgs, _: &Context) -> Result<Output, ToolError> {
    Output::text("ok")
        .with_json("data", &json!({"answer": 42, "items": [1, 2, 3]}))
        .map(|output| output.with_bytes("image", "image/png", b"\x89PNG\r\n\x1a\n".to_vec()))
}

fn env(_: NoArgs, _: &Context) -> Result<String, ToolError> {
    let lines: Vec<String> = std::env::vars()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    Ok(lines.join("\n"))
}

fn read_path(args: PathArgs, _: &Context) -> Result<String, ToolError> {
    std::fs::read_to_string(&args.path)
        .map_err(|error| ToolError::failed(format!("cannot read {}: {error}", args.path)))
}

fn write_path(args: WritePathArgs, _: &Context) -> Result<String, ToolError> {
    std::fs::write(&args.path, &args.content)
        .map_err(|error| ToolError::failed(format!("cannot write {}: {error}", args.path)))?;
    Ok(format!("wrote {} bytes", args.content.len()))
}

fn list_path(args: PathArgs, _: &Context) -> Result<String, ToolError> {
    let entries = std::fs::read_dir(&args.path)
        .map_err(|error| ToolError::failed(format!("cannot list {}: {error}", args.path)))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|error| ToolError::failed(format!("cannot list {}: {error}", args.path)))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names.join("\n"))
}

fn spin(_: NoArgs, _: &Context) -> Result<String, ToolError> {
    let mut counter = 0u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

fn sleep(args: SleepArgs, _: &Context) -> Result<String, ToolError> {
    std::thread::sleep(std::time::Duration::from_millis(args.ms));
    Ok("slept".into())
}

fn alloc(_: NoArgs, _: &Context) -> Result<String, ToolError> {
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    loop {
        // Filled, so the pages are really touched.
        blocks.push(vec![0xa5; 1024 * 1024]);
        black_box(&mut blocks);
    }
}

/// Written after every recursive call, so the call is never in tail position
/// and cannot be turned into a loop.
static mut DEPTH_SINK: u64 = 0;

/// One small frame per level. Nothing in it lives in linear memory (no
/// black_box here: it would spill the value to the shadow stack), so the
/// wasm call stack, not the shadow stack, is what runs out.
#[inline(never)]
fn descend(level: u64, limit: u64) -> u64 {
    if level >= limit {
        return level;
    }
    let reached = descend(level + 1, limit);
    // SAFETY: a plain volatile store to a static; components are
    // single-threaded, and the value is never read.
    unsafe { std::ptr::write_volatile(&raw mut DEPTH_SINK, reached) };
    reached
}

fn recurse(args: RecurseArgs, _: &Context) -> Result<String, ToolError> {
    // black_box hides the limit from the optimiser, so it cannot reason
    // about how deep the recursion goes.
    let reached = descend(0, black_box(args.depth.unwrap_or(u64::MAX)));
    Ok(format!("returned from depth {reached}"))
}

fn panic(args: MessageArgs, _: &Context) -> Result<String, ToolError> {
    panic!("{}", args.message)
}

fn big_output(args: BytesArgs, _: &Context) -> Result<String, ToolError> {
    Ok("x".repeat(args.bytes))
}

fn stdout_flood(args: BytesArgs, _: &Context) -> Result<String, ToolError> {
    let chunk = vec![b'y'; 64 * 1024];
    let mut stdout = std::io::stdout().lock();
    let mut left = args.bytes;
    while left > 0 {
        let size = left.min(chunk.len());
        // Write errors (a closed or capped stdout) are ignored on purpose.
        let _ = stdout.write_all(&chunk[..size]);
        left -= size;
    }
    let _ = stdout.flush();
    Ok("flooded".into())
}

static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Counts calls in a global: a fresh instance per call always answers 1.
fn counter(_: NoArgs, _: &Context) -> Result<String, ToolError> {
    let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    Ok(calls.to_string())
}

fn tcp_connect(args: AddrArgs, _: &Context) -> Result<String, ToolError> {
    std::net::TcpStream::connect(&args.addr)
        .map(|_| "connected".to_owned())
        .map_err(|error| ToolError::failed(format!("cannot connect to {}: {error}", args.addr)))
}

fn udp_send(args: AddrArgs, _: &Context) -> Result<String, ToolError> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")
        .map_err(|error| ToolError::failed(format!("cannot bind a UDP socket: {error}")))?;
    socket
        .send_to(b"ping", &args.addr)
        .map(|_| "sent".to_owned())
        .map_err(|error| ToolError::failed(format!("cannot send to {}: {error}", args.addr)))
}

/// `"<status>\n<body>"`; an error fails the call with the SDK's message.
fn http_get(args: HttpGetArgs, _: &Context) -> Result<String, ToolError> {
    let response = match args.max_body {
        None => http::get(&args.url)?,
        Some(limit) => http::Request::new(Method::Get, &args.url)
            .max_body(limit)
            .send()?,
    };
    Ok(format!(
        "{}\n{}",
        response.status,
        String::from_utf8_lossy(&response.body)
    ))
}

/// Everything the guest can see of a response, as JSON text.
fn http_request(args: HttpRequestArgs, _: &Context) -> Result<String, ToolError> {
    let method: Method = args.method.parse()?;
    let mut request = http::Request::new(method, &args.url);
    for (name, value) in args.headers.unwrap_or_default() {
        request = request.header(name, value);
    }
    if let Some(body) = args.body {
        request = request.body(body);
    }
    let response = request.send()?;
    let mut headers = BTreeMap::<String, String>::new();
    for (name, value) in &response.headers {
        headers
            .entry(name.clone())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    let value = json!({
        "status": response.status,
        "headers": headers,
        "body": String::from_utf8_lossy(&response.body),
    });
    Ok(value.to_string())
}

wasm_agent_guest::export_tools![
    Tool::new("echo", "Return text unchanged.", echo)
        .read_only()
        .idempotent(),
    Tool::new("context", "Return the call context as JSON.", context).read_only(),
    Tool::new(
        "state_set",
        "Store a JSON value in session state.",
        state_set
    ),
    Tool::new(
        "state_get",
        "Read a session-state value as JSON (null if unset).",
        state_get
    )
    .read_only(),
    Tool::new(
        "dependency",
        "Return a configured dependency value or (none).",
        dependency
    )
    .read_only(),
    Tool::new("emit", "Publish an event.", emit),
    Tool::new("log", "Write a log line.", log),
    Tool::new("delegate", "Ask another agent.", delegate),
    Tool::new(
        "cancelled",
        "Report whether the call is cancelled.",
        cancelled
    )
    .read_only(),
    Tool::new(
        "artifacts",
        "Return ok with a JSON and a bytes artifact.",
        artifacts
    )
    .read_only(),
    Tool::new("env", "List environment variables.", env).read_only(),
    Tool::new("read_path", "Read a file.", read_path).read_only(),
    Tool::new("write_path", "Write a file.", write_path).destructive(),
    Tool::new("list_path", "List a directory.", list_path).read_only(),
    Tool::new("spin", "Loop forever.", spin),
    Tool::new("sleep", "Sleep for ms milliseconds.", sleep),
    Tool::new("alloc", "Allocate memory without end.", alloc),
    Tool::new("recurse", "Recurse until the stack overflows.", recurse),
    Tool::new("panic", "Panic with the message.", panic),
    Tool::new("big_output", "Return that many bytes of x.", big_output),
    Tool::new(
        "stdout_flood",
        "Write that many bytes to stdout.",
        stdout_flood
    ),
    Tool::new("tcp_connect", "Open a TCP connection.", tcp_connect).open_world(),
    Tool::new("udp_send", "Send one UDP datagram.", udp_send).open_world(),
    Tool::new(
        "http_get",
        "GET a URL; return the status, a newline and the body.",
        http_get
    )
    .open_world(),
    Tool::new(
        "http_request",
        "Send an HTTP request; return status, headers and body as JSON.",
        http_request
    )
    .open_world(),
    Tool::new("counter", "Count calls seen by this instance.", counter),
];
