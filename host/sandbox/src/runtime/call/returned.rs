//! What a call returns counts against `max_output` and `max_artifacts`,
//! success or error: content, every artifact's data, kind and MIME type (plus
//! a fixed overhead per artifact), and the message of a tool's own error.

use crate::bindings::types;
use crate::result::{CallError, ErrorKind};
use wasm_agent_policy::Policy;

/// Bytes each artifact counts beyond its data, kind and MIME type: what
/// carrying it costs the caller (a JSON object, an MCP content block).
pub const ARTIFACT_OVERHEAD: usize = 64;

/// The size a successful result counts as.
pub fn output_size(output: &types::ToolOutput) -> usize {
    output
        .artifacts
        .iter()
        .fold(output.content.len(), |size, a| {
            size.saturating_add(
                a.data.len()
                    + a.kind.len()
                    + a.mime_type.as_ref().map_or(0, String::len)
                    + ARTIFACT_OVERHEAD,
            )
        })
}

/// Refuses a result with more artifacts or bytes than the policy allows.
pub fn check_output(output: &types::ToolOutput, policy: &Policy) -> Result<(), CallError> {
    if output.artifacts.len() > policy.max_artifacts as usize {
        return Err(CallError::new(
            ErrorKind::OutputTooLarge,
            format!(
                "the tool returned {} artifacts, more than the {} its policy allows (max_artifacts)",
                output.artifacts.len(),
                policy.max_artifacts
            ),
        ));
    }
    let size = output_size(output);
    if size as u64 > policy.max_output.bytes() {
        return Err(too_large(size, policy));
    }
    Ok(())
}

/// A tool's own error, unless its message is larger than `max_output`.
pub fn check_error(error: CallError, policy: &Policy) -> CallError {
    if error.message.len() as u64 > policy.max_output.bytes() {
        let mut refused = too_large(error.message.len(), policy);
        refused.message = format!("{} (in a {} error)", refused.message, error.kind);
        return refused;
    }
    error
}

fn too_large(size: usize, policy: &Policy) -> CallError {
    CallError::new(
        ErrorKind::OutputTooLarge,
        format!(
            "the tool returned {size} bytes, more than the {} its policy allows (max_output)",
            policy.max_output
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_agent_policy::ByteSize;

    fn artifact(kind: &str, mime: Option<&str>, data: usize) -> types::Artifact {
        types::Artifact {
            kind: kind.into(),
            mime_type: mime.map(Into::into),
            data: vec![0; data],
        }
    }

    #[test]
    fn every_part_of_a_result_counts() {
        let output = types::ToolOutput {
            content: "abc".into(),
            artifacts: vec![artifact("k", Some("text/plain"), 5), artifact("", None, 0)],
        };
        assert_eq!(output_size(&output), 3 + (5 + 1 + 10 + 64) + 64);
    }

    #[test]
    fn many_empty_artifacts_and_long_kinds_are_refused() {
        let policy = Policy::default().max_output(ByteSize::kib(1));
        let many = types::ToolOutput {
            content: String::new(),
            artifacts: (0..65).map(|_| artifact("", None, 0)).collect(),
        };
        let err = check_output(&many, &policy).unwrap_err();
        assert!(err.message.contains("max_artifacts"), "{err}");
        let long_kind = types::ToolOutput {
            content: String::new(),
            artifacts: vec![artifact(&"k".repeat(2000), None, 0)],
        };
        let err = check_output(&long_kind, &policy).unwrap_err();
        assert_eq!(err.kind, ErrorKind::OutputTooLarge);
        let long_mime = types::ToolOutput {
            content: String::new(),
            artifacts: vec![artifact("k", Some(&"m".repeat(2000)), 0)],
        };
        assert!(check_output(&long_mime, &policy).is_err());
    }

    #[test]
    fn long_error_messages_count_too() {
        let policy = Policy::default().max_output(ByteSize::kib(1));
        let error = CallError::new(ErrorKind::Failed, "e".repeat(2000));
        let refused = check_error(error, &policy);
        assert_eq!(refused.kind, ErrorKind::OutputTooLarge);
        assert!(refused.message.contains("failed"), "{}", refused.message);
        let short = CallError::new(ErrorKind::Failed, "nope");
        assert_eq!(check_error(short.clone(), &policy), short);
    }
}
