//! The user at the terminal as the one who answers questions about calls
//! (approvals, `ask` grants) under `wasm-agent run` and `wasm-agent call`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use wasm_agent::ask::{Asker, Question, Reply, Subject};
use wasm_agent::pipeline::Progress;

/// Asks on stderr and reads the answer from stdin; without a terminal,
/// nobody can answer (and the question is denied, saying so).
pub struct TerminalAsker {
    /// One question at a time, even when calls run in parallel.
    asking: tokio::sync::Mutex<()>,
}

impl TerminalAsker {
    pub fn new() -> Self {
        Self {
            asking: tokio::sync::Mutex::new(()),
        }
    }
}

#[async_trait::async_trait]
impl Asker for TerminalAsker {
    async fn ask(&self, question: &Question) -> Reply {
        let tool = wasm_agent::text::one_line(&question.tool);
        if !std::io::stdin().is_terminal() {
            match &question.subject {
                Subject::Call { .. } => eprintln!(
                    "  [approval] {tool} needs approval and there is no terminal to ask: denied \
                     (pass --approve {tool} to allow it)"
                ),
                _ => eprintln!(
                    "  [ask] {} There is no terminal to ask: denied.",
                    question.text()
                ),
            }
            return Reply::Unavailable;
        }
        let _turn = self.asking.lock().await;
        let _on_screen = OnScreen::set();
        let choices = if question.offer_session {
            // "Session" says what it covers (these exact arguments, ...).
            format!(
                "[y]es once, [s]ession ({}), [N]o",
                question.session_choice().to_lowercase()
            )
        } else {
            "[y/N]".into()
        };
        let label = match question.subject {
            Subject::Call { .. } | Subject::Remote { .. } => "approval",
            _ => "ask",
        };
        eprint!("  [{label}] {} {choices} ", question.text());
        let _ = std::io::stderr().flush();
        let answer = read_line().await.ok().flatten().unwrap_or_default();
        match answer.trim() {
            "y" | "Y" | "yes" => Reply::Once,
            "s" | "S" | "session" if question.offer_session => Reply::Session,
            _ => Reply::Deny,
        }
    }

    fn who(&self) -> String {
        if std::io::stdin().is_terminal() {
            "the user at the terminal".into()
        } else {
            "nobody: no terminal to ask".into()
        }
    }
}

/// Set while a question waits for its answer on the terminal.
static QUESTION_ON_SCREEN: AtomicBool = AtomicBool::new(false);

/// A question on the terminal, until dropped.
struct OnScreen;

impl OnScreen {
    fn set() -> Self {
        QUESTION_ON_SCREEN.store(true, Ordering::Release);
        Self
    }
}

impl Drop for OnScreen {
    fn drop(&mut self) {
        QUESTION_ON_SCREEN.store(false, Ordering::Release);
    }
}

/// A call's progress as a `  [progress] 2/5 message` line on stderr; none
/// while a question waits on the terminal (it would cut into the prompt).
pub fn show_progress(progress: &Progress) {
    if QUESTION_ON_SCREEN.load(Ordering::Acquire) {
        return;
    }
    let total = progress.total.map(|t| format!("/{t}")).unwrap_or_default();
    let message = progress.message.as_deref().unwrap_or_default();
    eprintln!(
        "  [progress] {}{total} {}",
        progress.progress,
        wasm_agent::text::one_line(message)
    );
}

/// One line of stdin, or `None` at its end.
pub async fn read_line() -> anyhow::Result<Option<String>> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line)),
            Err(e) => Err(anyhow::anyhow!("cannot read stdin: {e}")),
        }
    })
    .await
    .context("stdin reader stopped")?
}
