//! Checks of what components list and callers send: tool specs at load
//! (names, descriptions, schemas, each capped by the policy), arguments
//! before every call, and the error for a tool that does not exist.

use std::sync::Arc;

use serde_json::Value;

use crate::bindings::types;
use crate::registry::{ComponentEntry, ToolEntry, ToolInfo};
use crate::result::{CallError, ErrorKind};
use wasm_agent_policy::{ByteSize, Policy};

/// Why a component's tool list is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    /// A name outside 1-64 of `[a-zA-Z0-9_-]`.
    #[error("tool name {0:?} is invalid: use 1-64 characters of [a-zA-Z0-9_-]")]
    BadName(String),
    /// An empty description.
    #[error("tool {0:?} has an empty description; the model needs one to choose it")]
    NoDescription(String),
    /// Parameters that are not a usable JSON Schema.
    #[error("tool {tool:?} has unusable parameters: {reason}")]
    BadSchema {
        /// The tool's name.
        tool: String,
        /// What is wrong with its schema.
        reason: String,
    },
    /// The same name twice in one component.
    #[error("tool {0:?} is listed twice by the component")]
    Repeated(String),
    /// The component offers nothing.
    #[error("the component lists no tools")]
    Empty,
    /// More tools than the policy's `max_tools`.
    #[error("the component lists {count} tools, more than the {max} its policy allows (max_tools)")]
    TooManyTools {
        /// How many it listed.
        count: usize,
        /// The limit.
        max: u32,
    },
    /// A description or schema larger than the policy allows.
    #[error(
        "tool {tool:?} has a {what} of {size} bytes, more than the {max} its policy allows ({key})"
    )]
    TooLarge {
        /// The tool's name (cut to 64 characters).
        tool: String,
        /// `description` or `parameters schema`.
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        max: ByteSize,
        /// The policy key.
        key: &'static str,
    },
}

/// The error for a call to a tool that does not exist: the closest name
/// ("did you mean"), then (up to 30 of) the names that do exist.
pub fn unknown_tool<'a>(name: &str, known: impl ExactSizeIterator<Item = &'a str>) -> CallError {
    let total = known.len();
    // Only a valid name (at most 64 ASCII bytes) can be close to one: the
    // work stays linear in the list, with one small comparison per name.
    let wanted = valid_name(name).then(|| name.to_ascii_lowercase());
    let mut closest: Option<(f64, &str)> = None;
    let mut names: Vec<&str> = Vec::with_capacity(total.min(31));
    let mut candidate_lower = String::with_capacity(64);
    for candidate in known {
        if let Some(wanted) = &wanted {
            candidate_lower.clear();
            candidate_lower.extend(candidate.chars().map(|c| c.to_ascii_lowercase()));
            let score = strsim::jaro_winkler(wanted, &candidate_lower);
            if score >= SIMILAR && closest.is_none_or(|(best, _)| score > best) {
                closest = Some((score, candidate));
            }
        }
        if names.len() < 30 {
            names.push(candidate);
        }
    }
    if total > names.len() {
        names.push("...");
    }
    let shown: String = name.chars().take(64).collect();
    let shown = if shown.len() < name.len() {
        format!("{shown:?} (cut)")
    } else {
        format!("{shown:?}")
    };
    let hint = closest
        .map(|(_, candidate)| format!("did you mean {candidate:?}? "))
        .unwrap_or_default();
    let available = match names.is_empty() {
        true => "no tools are available".to_string(),
        false => format!("available tools: {}", names.join(", ")),
    };
    CallError::new(
        ErrorKind::UnknownTool,
        format!("there is no tool named {shown}; {hint}{available}"),
    )
}

/// How alike (Jaro-Winkler, case folded) a name must be to be suggested.
const SIMILAR: f64 = 0.85;

/// Checks a tool name: 1-64 characters of `[a-zA-Z0-9_-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks the specs a component listed and compiles their schemas.
///
/// Every check is linear in the size of the list, and the sizes are capped by
/// the policy (`max_tools`, `max_description`, `max_schema`) before anything
/// is parsed, so a hostile component cannot make loading slow.
pub(crate) fn check_specs(
    specs: Vec<types::ToolSpec>,
    prefix: &str,
    component: &Arc<ComponentEntry>,
) -> Result<Vec<ToolEntry>, SpecError> {
    let policy: &Policy = &component.policy;
    if specs.is_empty() {
        return Err(SpecError::Empty);
    }
    if specs.len() > policy.max_tools as usize {
        return Err(SpecError::TooManyTools {
            count: specs.len(),
            max: policy.max_tools,
        });
    }
    let mut seen = std::collections::HashSet::with_capacity(specs.len());
    let mut entries: Vec<ToolEntry> = Vec::with_capacity(specs.len());
    for spec in specs {
        if !valid_name(&spec.name) {
            return Err(SpecError::BadName(spec.name.chars().take(64).collect()));
        }
        let sizes = [
            (
                "description",
                &spec.description,
                policy.max_description,
                "max_description",
            ),
            (
                "parameters schema",
                &spec.parameters,
                policy.max_schema,
                "max_schema",
            ),
        ];
        for (what, text, max, key) in sizes {
            if text.len() as u64 > max.bytes() {
                return Err(SpecError::TooLarge {
                    tool: spec.name.clone(),
                    what,
                    size: text.len(),
                    max,
                    key,
                });
            }
        }
        let public = format!("{prefix}{}", spec.name);
        if !valid_name(&public) {
            return Err(SpecError::BadName(public));
        }
        if spec.description.trim().is_empty() {
            return Err(SpecError::NoDescription(spec.name));
        }
        if !seen.insert(spec.name.clone()) {
            return Err(SpecError::Repeated(spec.name));
        }
        let bad_schema = |reason: String| SpecError::BadSchema {
            tool: spec.name.clone(),
            reason,
        };
        let parameters: Value = serde_json::from_str(&spec.parameters).map_err(|e| {
            bad_schema(format!(
                "not JSON ({})",
                crate::text::one_line(&e.to_string())
            ))
        })?;
        if parameters.get("type") != Some(&Value::from("object")) {
            return Err(bad_schema(
                "the schema must describe an object (\"type\": \"object\")".into(),
            ));
        }
        // jsonschema quotes parts of the schema in its errors: escape them.
        let validator = compile_schema(&parameters)
            .map_err(|e| bad_schema(crate::text::one_line(&e.to_string()).into_owned()))?;
        entries.push(ToolEntry {
            info: ToolInfo {
                name: public,
                component: component.id.to_string(),
                digest: component.identity.digest.to_string(),
                description: spec.description,
                parameters,
                annotations: spec.annotations.into(),
            },
            guest_name: spec.name,
            validator,
            component: component.clone(),
        });
    }
    Ok(entries)
}

/// Compiles a tool's parameters schema. `pattern`, `patternProperties` and
/// `propertyNames` use the `regex` engine, whose matching time is linear in
/// the input: a schema cannot make validation backtrack (look-around and
/// back-references are refused at load instead).
pub fn compile_schema(
    schema: &Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options()
        .should_validate_formats(true)
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
}

/// Checks the size of a call's arguments text before anything parses it.
pub(crate) fn check_arguments_size(arguments: &str, policy: &Policy) -> Result<(), CallError> {
    check_size(arguments.len(), policy)
}

/// Checks the size parsed arguments have as JSON text, without writing it.
pub(crate) fn check_value_size(arguments: &Value, policy: &Policy) -> Result<(), CallError> {
    struct Counted(usize);
    impl std::io::Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counted = Counted(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counted, arguments);
    check_size(counted.0, policy)
}

fn check_size(length: usize, policy: &Policy) -> Result<(), CallError> {
    if length as u64 > policy.max_arguments.bytes() {
        return Err(CallError::new(
            ErrorKind::InvalidArguments,
            format!(
                "the arguments are {length} bytes, more than the {} the tool's policy allows \
                 (max_arguments)",
                policy.max_arguments
            ),
        ));
    }
    Ok(())
}

/// Checks parsed arguments against a compiled schema; the message lists up to
/// 20 violations as `pointer: reason`, for the model to fix.
pub fn check_value(
    validator: &jsonschema::Validator,
    tool: &str,
    value: &Value,
) -> Result<(), String> {
    if validator.is_valid(value) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(20)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let pointer = if pointer.is_empty() {
                "/".into()
            } else {
                pointer
            };
            format!("{pointer}: {e}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the arguments do not match the schema of {tool}: {}",
            problems.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_get_the_closest_name() {
        let known = ["calculate", "read_file", "fetch"];
        let message = unknown_tool("calcualte", known.into_iter()).message;
        assert!(message.contains("did you mean \"calculate\"?"), "{message}");
        let message = unknown_tool("Read_File", known.into_iter()).message;
        assert!(message.contains("did you mean \"read_file\"?"), "{message}");
        let message = unknown_tool("weather", known.into_iter()).message;
        assert!(!message.contains("did you mean"), "{message}");
        assert!(message.contains("calculate, read_file, fetch"), "{message}");
        let long = "x".repeat(100_000);
        let message = unknown_tool(&long, known.into_iter()).message;
        assert!(message.len() < 300, "{}", message.len());
    }
}
