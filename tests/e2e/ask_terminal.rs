//! `ask` grants under `wasm-agent call`, asked of the user at a terminal (a
//! pseudo-terminal from `script`, as an operator's shell gives), and denied
//! without one.

use crate::audit::http_server;
use crate::common::{component, on_a_terminal, run, stderr, stdout};

/// `call fetch` of `url` with `--ask grant`, answering `answer` at a terminal.
async fn call_on_a_terminal(grant: &str, url: &str, answer: &str) -> String {
    let command = format!(
        "{} call {} fetch '{{\"url\": \"{url}\"}}' --ask {grant} --json",
        env!("CARGO_BIN_EXE_wasm-agent"),
        component("fetch").display(),
    );
    let output = on_a_terminal(command, answer).await;
    stdout(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_at_the_terminal_allows_or_denies_a_destination() {
    let addr = http_server();
    let (grant, url) = (format!("http://{addr}"), format!("http://{addr}/page"));
    let allowed = call_on_a_terminal(&grant, &url, "y").await;
    assert!(
        allowed.contains(&format!(
            "[ask] Allow the tool \"fetch\" to connect to http://{addr}? [y/N]"
        )),
        "{allowed}"
    );
    assert!(allowed.contains("\"error\":null"), "{allowed}");
    let denied = call_on_a_terminal(&grant, &url, "n").await;
    assert!(
        denied.contains("\"kind\":\"capability_denied\""),
        "{denied}"
    );
    assert!(denied.contains("was asked: it was refused"), "{denied}");
}

#[test]
fn without_a_terminal_an_ask_grant_stays_denied() {
    let addr = http_server();
    let output = run(&[
        "call",
        &component("fetch").to_string_lossy(),
        "fetch",
        &format!("{{\"url\": \"http://{addr}/\"}}"),
        "--ask",
        &format!("http://{addr}"),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(
        text.contains("There is no terminal to ask: denied."),
        "{text}"
    );
    assert!(text.contains("capability_denied"), "{text}");
    assert!(
        text.contains(&format!("--allow-host http://{addr}")),
        "{text}"
    );
}
