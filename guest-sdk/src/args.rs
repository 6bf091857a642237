//! Arguments: the JSON Schema a tool advertises and the decoding of what the
//! model sent against it.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::ToolError;

/// The draft 2020-12 JSON Schema of `A`, as JSON text.
pub(crate) fn parameters_schema<A: JsonSchema>() -> String {
    let mut schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<A>();
    // The title is the Rust type name (e.g. "AddArgs"): noise to a model.
    schema.remove("title");
    let mut value = schema.to_value();
    unwrap_descriptions(&mut value);
    value.to_string()
}

/// Doc comments keep the line breaks of the source; a model reads better
/// without them. Single newlines become spaces, paragraph breaks stay.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match (key.as_str(), child) {
                    ("description", Value::String(text)) => *text = unwrap_lines(text),
                    // Literal data, not subschemas.
                    ("default" | "examples" | "const" | "enum", _) => {}
                    (_, child) => unwrap_descriptions(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Decodes the arguments JSON text into `A`.
///
/// Blank text and `null` count as `{}`, since models often send either for a
/// tool without parameters; any other non-object is rejected (serde would
/// otherwise read an array positionally into a struct). Every failure is
/// [`ToolError::InvalidArguments`];
/// a value that does not fit names the field as a JSON pointer, e.g.
/// `/items/2/price: invalid type: string "x", expected f64`.
pub fn decode<A: DeserializeOwned>(arguments: &str) -> Result<A, ToolError> {
    let trimmed = arguments.trim();
    let text = if trimmed.is_empty() || trimmed == "null" {
        "{}"
    } else {
        arguments
    };
    if let Some(kind) = non_object_kind(text) {
        return Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, not {kind}"
        )));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|error| describe(&json_pointer(error.path()), error.inner()))?;
    // Trailing text after the object is a syntax error, so no pointer is needed.
    deserializer.end().map_err(|error| describe("", &error))?;
    Ok(value)
}

/// What the text holds if it is not an object, judged by its first character.
fn non_object_kind(text: &str) -> Option<&'static str> {
    match text.trim_start().chars().next() {
        Some('{') => None,
        Some('[') => Some("an array"),
        Some('"') => Some("a string"),
        Some('t' | 'f') => Some("a boolean"),
        Some('-' | '0'..='9') => Some("a number"),
        _ => Some("something that is not JSON"),
    }
}

fn describe(pointer: &str, error: &serde_json::Error) -> ToolError {
    if error.is_syntax() || error.is_eof() {
        return ToolError::invalid_arguments(format!("arguments are not valid JSON: {error}"));
    }
    let reason = strip_position(error);
    if pointer.is_empty() {
        ToolError::invalid_arguments(reason)
    } else {
        ToolError::invalid_arguments(format!("{pointer}: {reason}"))
    }
}

/// serde_json appends " at line L column C" to data errors; with a JSON
/// pointer in front that position only adds noise.
fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    if error.line() == 0 {
        return text;
    }
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&suffix) {
        Some(reason) => reason.to_owned(),
        None => text,
    }
}

/// RFC 6901 pointer for a serde_path_to_error path; segments the tracker could
/// not name (inside untagged enums or flattened maps) are left out, so the
/// pointer names the nearest known ancestor.
fn json_pointer(path: &serde_path_to_error::Path) -> String {
    let mut pointer = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => {
                pointer.push('/');
                pointer.push_str(&index.to_string());
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Unknown => {}
        }
    }
    pointer
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::NoArgs;

    /// An order
    /// to price.
    ///
    /// Second paragraph.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Order {
        /// Lines of the order.
        items: Vec<Item>,
        /// Discount in percent.
        discount: Option<f64>,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        price: f64,
    }

    fn schema_of<A: JsonSchema>() -> Value {
        serde_json::from_str(&parameters_schema::<A>()).unwrap()
    }

    fn error_of<A: DeserializeOwned + std::fmt::Debug>(arguments: &str) -> ToolError {
        decode::<A>(arguments).unwrap_err()
    }

    #[test]
    fn schema_is_draft_2020_12_with_descriptions_and_no_title() {
        let schema = schema_of::<Order>();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert!(schema.get("title").is_none());
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["description"],
            "An order to price.\n\nSecond paragraph."
        );
        assert_eq!(
            schema["properties"]["items"]["description"],
            "Lines of the order."
        );
        assert_eq!(schema["required"], json!(["items"]));
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["$defs"]["Item"]["required"],
            json!(["name", "price"])
        );
    }

    #[test]
    fn schema_of_no_args_is_a_closed_empty_object() {
        let schema = schema_of::<NoArgs>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn wrong_type_names_the_field_as_a_json_pointer() {
        let error = error_of::<Order>(
            r#"{"items": [{"name": "a", "price": 1}, {"name": "b", "price": 2},
                {"name": "c", "price": "x"}]}"#,
        );
        assert_eq!(
            error,
            ToolError::InvalidArguments(
                r#"/items/2/price: invalid type: string "x", expected f64"#.into()
            )
        );
    }

    #[test]
    fn missing_field_names_the_containing_object() {
        let error = error_of::<Order>(r#"{"items": [{"name": "a"}]}"#);
        assert_eq!(
            error,
            ToolError::InvalidArguments("/items/0: missing field `price`".into())
        );
        let error = error_of::<Order>("{}");
        assert_eq!(
            error,
            ToolError::InvalidArguments("missing field `items`".into())
        );
    }

    #[test]
    fn unknown_field_is_rejected_when_the_struct_denies_them() {
        let error = error_of::<Order>(r#"{"items": [], "coupon": "X"}"#);
        let ToolError::InvalidArguments(message) = error else {
            panic!("wrong kind: {error:?}");
        };
        assert!(
            message.starts_with("/coupon: unknown field `coupon`"),
            "{message}"
        );
    }

    #[test]
    fn map_keys_are_escaped_in_the_pointer() {
        let error = error_of::<BTreeMap<String, u8>>(r#"{"a/b~c": 300}"#);
        let ToolError::InvalidArguments(message) = error else {
            panic!("wrong kind: {error:?}");
        };
        assert!(
            message.starts_with("/a~1b~0c: invalid value: integer `300`"),
            "{message}"
        );
    }

    #[test]
    fn invalid_json_is_invalid_arguments() {
        for text in [r#"{"items": ["#, "{items: []}", r#"{"items": []} trailing"#] {
            let error = error_of::<Order>(text);
            let ToolError::InvalidArguments(message) = error else {
                panic!("wrong kind for {text:?}: {error:?}");
            };
            assert!(
                message.starts_with("arguments are not valid JSON: "),
                "{message}"
            );
        }
    }

    #[test]
    fn blank_and_null_arguments_mean_an_empty_object() {
        for text in ["", "  \n", "null", "{}"] {
            assert_eq!(decode::<NoArgs>(text), Ok(NoArgs {}), "{text:?}");
        }
        let error = error_of::<NoArgs>(r#"{"x": 1}"#);
        assert!(matches!(error, ToolError::InvalidArguments(_)));
    }

    #[test]
    fn non_object_arguments_are_rejected() {
        for (text, kind) in [
            ("[1, 2]", "an array"),
            (" \"{}\"", "a string"),
            ("42", "a number"),
            ("true", "a boolean"),
            ("<xml/>", "something that is not JSON"),
        ] {
            assert_eq!(
                error_of::<Order>(text),
                ToolError::InvalidArguments(format!("arguments must be a JSON object, not {kind}")),
                "{text:?}"
            );
        }
    }
}
