//! How results and tool lists are printed.

use std::io::Write;

use wasm_agent::text::{multi_line, one_line};
use wasm_agent::{ToolCallResult, ToolInfo};

/// Prints a call's result: the content (or one JSON object with `--json`).
pub fn print_call(result: &ToolCallResult, json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        let value = serde_json::json!({
            "tool": result.tool,
            "content": result.content,
            "artifacts": result.artifacts,
            "error": result.error,
            "duration_ms": (result.duration.as_secs_f64() * 1_000_000.0).round() / 1000.0,
        });
        writeln!(stdout, "{value}")?;
        return Ok(());
    }
    match &result.error {
        None => {
            // Raw into a pipe or file (the content is the product); escaped
            // on a terminal, where a tool's escape sequences would act.
            if std::io::IsTerminal::is_terminal(&stdout) {
                stdout.write_all(multi_line(&result.content).as_bytes())?;
            } else {
                stdout.write_all(result.content.as_bytes())?;
            }
            if !result.content.ends_with('\n') {
                writeln!(stdout)?;
            }
            for artifact in &result.artifacts {
                eprintln!(
                    "artifact: {} ({}, {} bytes)",
                    one_line(&artifact.kind),
                    one_line(artifact.mime_type.as_deref().unwrap_or("no MIME type")),
                    artifact.data.len()
                );
            }
        }
        Some(error) => eprintln!("error: {}: {}", error.kind, one_line(&error.message)),
    }
    Ok(())
}

/// A table of names, descriptions and annotations. Names are escaped too:
/// another MCP server's (`tools --mcp`) are its own choice.
pub fn tools_table(tools: &[ToolInfo]) -> String {
    let names: Vec<_> = tools.iter().map(|t| one_line(&t.name)).collect();
    let name_width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:name_width$}  {:60}  ANNOTATIONS\n",
        "NAME", "DESCRIPTION"
    );
    for (tool, name) in tools.iter().zip(&names) {
        let description = tool.description.lines().next().unwrap_or_default();
        let description = one_line(description);
        let description = if description.chars().count() > 60 {
            format!("{}...", description.chars().take(57).collect::<String>())
        } else {
            description.to_string()
        };
        let a = &tool.annotations;
        let flags: Vec<&str> = [
            (a.read_only, "read-only"),
            (a.destructive, "destructive"),
            (a.idempotent, "idempotent"),
            (a.open_world, "open-world"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        out.push_str(&format!(
            "{name:name_width$}  {description:60}  {}\n",
            if flags.is_empty() {
                "-".to_string()
            } else {
                flags.join(", ")
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_name_cannot_send_the_terminal_an_escape_sequence() {
        let tool = ToolInfo {
            name: "evil\u{1b}]0;owned\u{7}\u{1b}[2J".into(),
            component: "mcp:hostile".into(),
            digest: String::new(),
            description: "fine\u{1b}[31m".into(),
            parameters: serde_json::json!({"type": "object"}),
            annotations: Default::default(),
        };
        let table = tools_table(&[tool]);
        assert!(
            !table.contains('\u{1b}') && !table.contains('\u{7}'),
            "{table:?}"
        );
        assert!(table.contains("evil"), "{table}");
    }
}
