//! The call's output when a script ends: what it printed and the value of
//! its last expression, each cut to a bound and marked when cut.

use monty_types::MontyObject;

use crate::state::Printed;

/// Characters of the last expression's repr kept.
const VALUE_KEPT: usize = 8 * 1024;

/// `stdout:` then `value:` (the repr of the last expression, unless None),
/// or `(no output)`.
pub fn render(printed: &Printed, value: &MontyObject) -> String {
    let mut sections = Vec::new();
    if !printed.kept.is_empty() || printed.dropped > 0 {
        let mut text = printed.kept.trim_end_matches('\n').to_string();
        if printed.dropped > 0 {
            text.push_str(&format!("\n[... {} more bytes cut]", printed.dropped));
        }
        sections.push(format!("stdout:\n{text}"));
    }
    if !matches!(value, MontyObject::None) {
        sections.push(format!("value:\n{}", cut(&value.py_repr(), VALUE_KEPT)));
    }
    if sections.is_empty() {
        return "(no output)".into();
    }
    sections.join("\n\n")
}

/// What the script printed before it failed, then the traceback.
pub fn failure(printed: &Printed, traceback: &str, hint: Option<&str>) -> String {
    let mut text = String::new();
    if !printed.kept.is_empty() {
        text.push_str("stdout:\n");
        text.push_str(printed.kept.trim_end_matches('\n'));
        text.push_str("\n\n");
    }
    text.push_str(traceback.trim_end());
    if let Some(hint) = hint {
        text.push_str("\n\n");
        text.push_str(hint);
    }
    text
}

fn cut(text: &str, kept: usize) -> String {
    let total = text.chars().count();
    if total <= kept {
        return text.to_string();
    }
    let head: String = text.chars().take(kept).collect();
    format!("{head}[... {} more characters cut]", total - kept)
}
