//! What models write, accepted where the sandbox can honour it: Node-style
//! JavaScript (`require('fs')`, `readFileSync`/`writeFileSync`,
//! `fs.promises`, a callback, a last expression after top-level `await`)
//! and Python reaching for `requests` or `urllib.request` (over the granted
//! network only); what the sandbox cannot honour is refused saying what to
//! write instead.

use std::io::{Read, Write};
use std::net::TcpListener;

use serde_json::{Value, json};

use crate::common::{run, stderr, stdout};
use crate::polyglot::polyglot;

/// `call` of interpreter `tool` with `code` and `flags`, as JSON.
fn call(tool: &str, code: &str, flags: &[&str]) -> Value {
    let interpreter = polyglot(tool).display().to_string();
    let arguments = json!({ "code": code }).to_string();
    let mut args = vec!["call", &interpreter, tool, &arguments, "--json"];
    args.extend_from_slice(flags);
    let output = run(&args);
    serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("{e}: {} / {}", stdout(&output), stderr(&output)))
}

/// A loopback server answering `/missing` with 404 and anything else with
/// `{"n": 41}`.
fn json_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 4096];
            let read = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..read]);
            let (status, body) = match request.starts_with("GET /missing") {
                true => ("404 Not Found", "{}"),
                false => ("200 OK", r#"{"n": 41}"#),
            };
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    addr
}

#[test]
fn node_style_javascript_gets_the_sandboxed_fs() {
    let code = "const fs = require('fs');\n\
                const path = require('node:path');\n\
                fs.mkdirSync('out/deep', { recursive: true });\n\
                fs.writeFileSync(path.join('out', 'a.txt'), 'hello');\n\
                console.log(fs.existsSync('out/a.txt'), fs.statSync('out/a.txt').isFile(), String(fs.readFileSync('out/a.txt')));\n\
                const { readFile } = require('fs/promises');\n\
                const text = await fs.promises.readFile('out/a.txt', 'utf8');\n\
                fs.readFile('out/a.txt', 'utf8', (err, data) => console.log('callback', err, data));\n\
                text.length + (await readFile('out/a.txt', 'utf8')).length";
    let result = call("run_javascript", code, &["--scratch"]);
    assert_eq!(result["error"], Value::Null, "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.starts_with("stdout:\ntrue true hello\ncallback null hello\n\nvalue:\n10"),
        "{content}"
    );
    // Outside the grants, Node's names see what ours see.
    let result = call(
        "run_javascript",
        "require('fs').readFileSync('/etc/passwd', 'utf8')",
        &[],
    );
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ENOENT: no such file or directory, open '/etc/passwd'"),
        "{message}"
    );
}

#[test]
fn modules_the_sandbox_lacks_say_what_to_write_instead() {
    for module in ["child_process", "http", "os"] {
        let code = format!("require('{module}')");
        let result = call("run_javascript", &code, &[]);
        let message = result["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "Cannot find module '{module}': this sandbox has require('fs')"
            )),
            "{message}"
        );
        assert!(message.contains("fetch() for HTTP"), "{message}");
    }
    let result = call("run_javascript", "process.exit(1)", &[]);
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("process.exit is not available"),
        "{message}"
    );
}

#[test]
fn a_last_expression_after_top_level_await_is_the_value() {
    let result = call(
        "run_javascript",
        "const x = await Promise.resolve(41)\nx + 1",
        &[],
    );
    assert_eq!(result["content"], "value:\n42", "{result}");
    // A last line that is not an expression, or `return`, still works.
    let result = call(
        "run_javascript",
        "const x = await Promise.resolve(1)\nreturn x",
        &[],
    );
    assert_eq!(result["content"], "value:\n1", "{result}");
    let result = call(
        "run_javascript",
        "await null\nif (true) {\n  console.log('in')\n}",
        &[],
    );
    assert_eq!(result["content"], "stdout:\nin", "{result}");
}

#[test]
fn python_reaching_for_requests_or_urllib_gets_the_granted_network() {
    let addr = json_server();
    let grant = format!("http://{addr}");
    let code = format!(
        "import requests, urllib.request, urllib.error, json\n\
         r = requests.get('http://{addr}/data', params={{'q': 1}}, timeout=5)\n\
         r.raise_for_status()\n\
         with urllib.request.urlopen('http://{addr}/data') as f:\n    \
             via_urllib = json.loads(f.read())['n']\n\
         try:\n    requests.get('http://{addr}/missing').raise_for_status()\n\
         except requests.exceptions.HTTPError as e:\n    print('requests', e.response.status_code)\n\
         try:\n    urllib.request.urlopen('http://{addr}/missing')\n\
         except urllib.error.HTTPError as e:\n    print('urllib', e.code)\n\
         (r.status_code, r.json()['n'] + 1, via_urllib)"
    );
    let result = call("run_python", &code, &["--allow-host", &grant]);
    assert_eq!(
        result["content"], "stdout:\nrequests 404\nurllib 404\n\nvalue:\n(200, 42, 41)",
        "{result}"
    );
    // A host the policy does not grant is refused before anything is sent.
    let result = call(
        "run_python",
        "import requests\nrequests.get('http://example.com/')",
        &["--allow-host", &grant],
    );
    assert_eq!(result["error"]["kind"], "capability_denied", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--allow-host http://example.com:80"),
        "{message}"
    );
}
