//! JSON tools: query a document by path, reformat it, and outline its shape.

mod path;
mod summary;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_json::ser::{PrettyFormatter, Serializer};
use wasm_agent_guest::{Context, Output, Tool, ToolError};

/// Largest indent `json_format` accepts.
const MAX_INDENT: usize = 16;

/// A document and a path into it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// The JSON document, as text.
    document: String,
    /// Where to look: a JSON pointer such as `/items/0/name`, or a dotted
    /// path such as `items[0].name` (optional `$` prefix, `[-1]` for the last
    /// element, `["odd key"]` for keys with dots or spaces). Empty or `$`
    /// selects the whole document.
    path: String,
}

/// A document to reformat.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FormatArgs {
    /// The JSON document, as text.
    document: String,
    /// Spaces per level (default 2, at most 16); 0 prints compact JSON on
    /// one line.
    indent: Option<usize>,
    /// Sort object keys alphabetically (default false: keep their order).
    sort_keys: Option<bool>,
}

/// A document to outline.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SummarizeArgs {
    /// The JSON document, as text.
    document: String,
    /// Levels below the root to expand (default 6).
    max_depth: Option<usize>,
}

fn parse_document(text: &str) -> Result<Value, ToolError> {
    serde_json::from_str(text).map_err(|error| {
        ToolError::invalid_arguments(format!("document is not valid JSON: {error}"))
    })
}

fn json_query(args: QueryArgs, _: &Context) -> Result<String, ToolError> {
    let document = parse_document(&args.document)?;
    let steps = path::parse(&args.path).map_err(ToolError::invalid_arguments)?;
    let found = path::lookup(&document, &steps).map_err(ToolError::failed)?;
    Ok(serde_json::to_string_pretty(found)?)
}

fn json_format(args: FormatArgs, _: &Context) -> Result<String, ToolError> {
    let mut document = parse_document(&args.document)?;
    if args.sort_keys.unwrap_or(false) {
        document.sort_all_objects();
    }
    let indent = args.indent.unwrap_or(2);
    if indent > MAX_INDENT {
        return Err(ToolError::invalid_arguments(format!(
            "indent {indent} is too large; use 0 to {MAX_INDENT}"
        )));
    }
    if indent == 0 {
        return Ok(serde_json::to_string(&document)?);
    }
    let spaces = vec![b' '; indent];
    let mut out = Vec::new();
    let mut serializer =
        Serializer::with_formatter(&mut out, PrettyFormatter::with_indent(&spaces));
    serde::Serialize::serialize(&document, &mut serializer)?;
    String::from_utf8(out).map_err(|error| ToolError::failed(error.to_string()))
}

fn json_summarize(args: SummarizeArgs, _: &Context) -> Result<Output, ToolError> {
    let document = parse_document(&args.document)?;
    let mut limits = summary::Limits::default();
    if let Some(depth) = args.max_depth {
        limits.max_depth = depth;
    }
    Ok(Output::text(summary::summarize(&document, limits)))
}

wasm_agent_guest::export_tools![
    Tool::new(
        "json_query",
        "Extract one value from a JSON document by path (JSON pointer like /a/0/b, or a \
         dotted path like a.b[0].c) and return it as JSON.",
        json_query
    )
    .read_only()
    .idempotent(),
    Tool::new(
        "json_format",
        "Reformat a JSON document: pretty-print with the given indent, or compact with \
         indent 0; optionally sort keys.",
        json_format
    )
    .read_only()
    .idempotent(),
    Tool::new(
        "json_summarize",
        "Outline the structure of a JSON document (types, keys, array lengths; records in \
         arrays merged into one shape) without printing all of it. Use it before querying \
         a large document.",
        json_summarize
    )
    .read_only()
    .idempotent(),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn format(
        document: &str,
        indent: Option<usize>,
        sort_keys: Option<bool>,
    ) -> Result<String, ToolError> {
        let args = FormatArgs {
            document: document.into(),
            indent,
            sort_keys,
        };
        json_format(args, &Context::default())
    }

    #[test]
    fn format_keeps_key_order_unless_asked_to_sort() {
        let document = r#"{"b": 1, "a": [1, {"d": null, "c": true}]}"#;
        assert_eq!(
            format(document, Some(0), None).unwrap(),
            r#"{"b":1,"a":[1,{"d":null,"c":true}]}"#
        );
        assert_eq!(
            format(document, Some(0), Some(true)).unwrap(),
            r#"{"a":[1,{"c":true,"d":null}],"b":1}"#
        );
        assert_eq!(format("[1]", Some(4), None).unwrap(), "[\n    1\n]");
        assert_eq!(format("{\"a\":1}", None, None).unwrap(), "{\n  \"a\": 1\n}");
        assert!(matches!(
            format("[1]", Some(17), None),
            Err(ToolError::InvalidArguments(_))
        ));
        let error = format("{", None, None).unwrap_err();
        assert!(
            error
                .message()
                .starts_with("document is not valid JSON: EOF"),
            "{error}"
        );
    }

    #[test]
    fn query_returns_json_and_explains_misses() {
        let query = |path: &str| {
            json_query(
                QueryArgs {
                    document: r#"{"a": [{"b": "x"}]}"#.into(),
                    path: path.into(),
                },
                &Context::default(),
            )
        };
        assert_eq!(query("a[0].b"), Ok("\"x\"".into()));
        assert_eq!(query("/a/0"), Ok("{\n  \"b\": \"x\"\n}".into()));
        assert_eq!(
            query("a[1]"),
            Err(ToolError::failed("index 1 is out of range: $.a has 1 item"))
        );
        assert!(matches!(query("a..b"), Err(ToolError::InvalidArguments(_))));
    }
}
