//! Tools, the set a component exports, and dispatch of calls to them.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::bindings::wasm_agent::tool::types as wit;
use crate::{Context, Output, ToolError, args};

type Handler = Box<dyn Fn(&str, &Context) -> Result<Output, ToolError> + Send + Sync>;

/// One tool: a name, a description for the model, a handler and annotations.
///
/// The handler is a plain function `fn(Args, &Context) -> Result<impl
/// Into<Output>, ToolError>`; `Args` derives `serde::Deserialize` and
/// `schemars::JsonSchema`, and its schema (doc comments included) becomes the
/// tool's `parameters`.
pub struct Tool {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    parameters: fn() -> String,
    handler: Handler,
    annotations: wit::Annotations,
}

impl Tool {
    /// A tool named `name` (1-64 characters of `[a-zA-Z0-9_-]`, checked when
    /// the toolkit is built) that runs `handler`. No annotations are set.
    /// Literal names and descriptions are not copied: a fresh instance per
    /// call builds its tools without allocating for them.
    pub fn new<A, O, F>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        O: Into<Output>,
        F: Fn(A, &Context) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: args::parameters_schema::<A>,
            handler: Box::new(move |arguments, context| {
                let arguments = args::decode::<A>(arguments)?;
                handler(arguments, context).map(Into::into)
            }),
            annotations: wit::Annotations::empty(),
        }
    }

    /// Marks the tool as not changing anything outside itself.
    pub fn read_only(mut self) -> Self {
        self.annotations |= wit::Annotations::READ_ONLY;
        self
    }

    /// Marks the tool as able to delete or overwrite data.
    pub fn destructive(mut self) -> Self {
        self.annotations |= wit::Annotations::DESTRUCTIVE;
        self
    }

    /// Marks repeated calls with the same arguments as having no further effect.
    pub fn idempotent(mut self) -> Self {
        self.annotations |= wit::Annotations::IDEMPOTENT;
        self
    }

    /// Marks the tool as reaching an open set of external things (the web, a
    /// shared file system) rather than a closed one.
    pub fn open_world(mut self) -> Self {
        self.annotations |= wit::Annotations::OPEN_WORLD;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description written for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema (draft 2020-12) of the arguments, as JSON text.
    pub fn parameters(&self) -> String {
        (self.parameters)()
    }

    /// Decodes `arguments` (JSON text) and runs the handler; this is what the
    /// host's `call` reaches, and what unit tests can call directly.
    pub fn call(&self, arguments: &str, context: &Context) -> Result<Output, ToolError> {
        (self.handler)(arguments, context)
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("annotations", &self.annotations)
            .finish_non_exhaustive()
    }
}

/// Arguments of a tool that takes none; rejects any field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// True if `name` is 1-64 characters of `[a-zA-Z0-9_-]`, as the WIT contract
/// requires of tool names.
pub const fn is_valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > 64 {
        return false;
    }
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if !(byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-') {
            return false;
        }
        index += 1;
    }
    true
}

/// The tools one component exports, with valid and unique names.
#[derive(Debug)]
pub struct Toolkit {
    tools: Vec<Tool>,
}

/// Why a set of tools cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidToolkit(String);

impl fmt::Display for InvalidToolkit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidToolkit {}

impl Toolkit {
    /// Checks that every name is valid and unique.
    pub fn new(tools: Vec<Tool>) -> Result<Self, InvalidToolkit> {
        if tools.is_empty() {
            return Err(InvalidToolkit(
                "a component must export at least one tool".into(),
            ));
        }
        for (index, tool) in tools.iter().enumerate() {
            if !is_valid_tool_name(&tool.name) {
                return Err(InvalidToolkit(format!(
                    "tool name {:?} is invalid: use 1-64 characters of [a-zA-Z0-9_-]",
                    tool.name
                )));
            }
            if tools[..index].iter().any(|other| other.name == tool.name) {
                return Err(InvalidToolkit(format!(
                    "tool name {:?} is used twice",
                    tool.name
                )));
            }
        }
        Ok(Self { tools })
    }

    /// The tools, in the order they were given.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Runs the tool called `name`, or fails with [`ToolError::UnknownTool`]
    /// naming the tools that exist.
    pub fn call(
        &self,
        name: &str,
        arguments: &str,
        context: &Context,
    ) -> Result<Output, ToolError> {
        dispatch(&self.tools, name, arguments, context)
    }
}

/// Runs the first of `tools` called `name`, or fails naming them all.
fn dispatch(
    tools: &[Tool],
    name: &str,
    arguments: &str,
    context: &Context,
) -> Result<Output, ToolError> {
    match tools.iter().find(|tool| tool.name == name) {
        Some(tool) => tool.call(arguments, context),
        None => {
            let available: Vec<&str> = tools.iter().map(Tool::name).collect();
            Err(ToolError::UnknownTool(format!(
                "this component has no tool named {name:?}; it offers: {}",
                available.join(", ")
            )))
        }
    }
}

/// Builds the toolkit for [`crate::export_tools!`]. A bad tool name is a bug
/// in the tool crate, not something input can cause, so it traps the
/// component on first use with a message saying which name is wrong.
#[doc(hidden)]
pub fn toolkit_or_trap(tools: Vec<Tool>) -> Toolkit {
    match Toolkit::new(tools) {
        Ok(toolkit) => toolkit,
        Err(error) => panic!("wasm-agent-guest: {error}"),
    }
}

/// `list-tools` of the exported interface.
#[doc(hidden)]
pub fn list_exported(toolkit: &Toolkit) -> Vec<wit::ToolSpec> {
    toolkit
        .tools
        .iter()
        .map(|tool| wit::ToolSpec {
            name: tool.name.to_string(),
            description: tool.description.to_string(),
            parameters: tool.parameters(),
            annotations: tool.annotations,
        })
        .collect()
}

/// `call` of the exported interface. The tools are not checked again here:
/// `list-tools`, which every host runs before calling, checks them (and a
/// component whose listing traps is never loaded).
#[doc(hidden)]
pub fn call_exported(
    tools: &[Tool],
    name: String,
    arguments: String,
    context: wit::CallContext,
) -> Result<wit::ToolOutput, wit::ToolError> {
    let context = Context::from(context);
    dispatch(tools, &name, &arguments, &context)
        .map(Into::into)
        .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, JsonSchema)]
    struct Pair {
        a: f64,
        b: f64,
    }

    fn add(pair: Pair, _: &Context) -> Result<String, ToolError> {
        Ok((pair.a + pair.b).to_string())
    }

    fn div(pair: Pair, _: &Context) -> Result<Output, ToolError> {
        if pair.b == 0.0 {
            return Err("division by zero".into());
        }
        Output::text((pair.a / pair.b).to_string()).with_json("quotient", &(pair.a / pair.b))
    }

    fn toolkit() -> Toolkit {
        Toolkit::new(vec![
            Tool::new("add", "Add.", add).read_only().idempotent(),
            Tool::new("div", "Divide.", div),
        ])
        .unwrap()
    }

    #[test]
    fn call_dispatches_by_name() {
        let context = Context::default();
        let output = toolkit()
            .call("add", r#"{"a": 1, "b": 2.5}"#, &context)
            .unwrap();
        assert_eq!(output.content(), "3.5");
        let output = toolkit()
            .call("div", r#"{"a": 1, "b": 4}"#, &context)
            .unwrap();
        assert_eq!(output.content(), "0.25");
        assert_eq!(output.artifacts()[0].kind, "quotient");
        assert_eq!(
            output.artifacts()[0].mime_type.as_deref(),
            Some("application/json")
        );
        assert_eq!(output.artifacts()[0].data, b"0.25");
    }

    #[test]
    fn handler_errors_and_argument_errors_keep_their_kind() {
        let context = Context::default();
        let error = toolkit()
            .call("div", r#"{"a": 1, "b": 0}"#, &context)
            .unwrap_err();
        assert_eq!(error, ToolError::Failed("division by zero".into()));
        let error = toolkit().call("div", r#"{"a": 1}"#, &context).unwrap_err();
        assert_eq!(
            error,
            ToolError::InvalidArguments("missing field `b`".into())
        );
    }

    #[test]
    fn unknown_tool_names_the_available_ones() {
        let error = toolkit()
            .call("mul", "{}", &Context::default())
            .unwrap_err();
        assert_eq!(
            error,
            ToolError::UnknownTool(
                r#"this component has no tool named "mul"; it offers: add, div"#.into()
            )
        );
    }

    #[test]
    fn annotations_and_schema_reach_the_spec() {
        let specs = list_exported(&toolkit());
        assert_eq!(specs[0].name, "add");
        assert_eq!(
            specs[0].annotations,
            wit::Annotations::READ_ONLY | wit::Annotations::IDEMPOTENT
        );
        assert_eq!(specs[1].annotations, wit::Annotations::empty());
        let schema: serde_json::Value = serde_json::from_str(&specs[0].parameters).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["a", "b"]));
    }

    #[test]
    fn tool_names_are_checked() {
        assert!(is_valid_tool_name("read_file-2"));
        assert!(is_valid_tool_name(&"a".repeat(64)));
        for bad in ["", "a b", "naïve", "a.b", "a/b"] {
            assert!(!is_valid_tool_name(bad), "{bad:?}");
        }
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        let error = Toolkit::new(vec![Tool::new("a b", "", add)]).unwrap_err();
        assert!(error.to_string().contains(r#""a b" is invalid"#));
        let error =
            Toolkit::new(vec![Tool::new("add", "", add), Tool::new("add", "", div)]).unwrap_err();
        assert_eq!(error.to_string(), r#"tool name "add" is used twice"#);
        assert!(Toolkit::new(Vec::new()).is_err());
    }

    #[test]
    fn context_metadata_is_always_an_object() {
        let wit_context = |metadata: &str| wit::CallContext {
            run_id: "r".into(),
            session_id: "s".into(),
            user_id: Some("u".into()),
            tenant_id: None,
            metadata: metadata.into(),
        };
        let context = Context::from(wit_context(r#"{"k": 1}"#));
        assert_eq!(context.metadata, serde_json::json!({"k": 1}));
        assert_eq!(context.user_id.as_deref(), Some("u"));
        for bad in ["", "[1]", "not json"] {
            assert_eq!(
                Context::from(wit_context(bad)).metadata,
                serde_json::json!({})
            );
        }
    }

    #[test]
    fn errors_convert_for_question_mark() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(ToolError::from(io), ToolError::Failed("gone".into()));
        let json = serde_json::from_str::<u8>("x").unwrap_err();
        assert!(
            matches!(ToolError::from(json), ToolError::Failed(m) if m.starts_with("JSON error: "))
        );
        assert_eq!(ToolError::from("x").to_string(), "failed: x");
    }
}
