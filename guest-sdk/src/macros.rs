/// Exports tools from this component.
///
/// Takes a comma-separated list of [`Tool`](crate::Tool) expressions, defines
/// a private type implementing the `wasm-agent:tool/tool@0.1.3` interface and
/// exports it. Use it once per crate, at module level:
///
/// ```
/// # use serde::Deserialize;
/// # use schemars::JsonSchema;
/// # use wasm_agent_guest::{Context, Tool, ToolError};
/// # #[derive(Deserialize, JsonSchema)]
/// # struct Pair { a: f64, b: f64 }
/// # fn add(p: Pair, _: &Context) -> Result<String, ToolError> { Ok((p.a + p.b).to_string()) }
/// # fn div(p: Pair, _: &Context) -> Result<String, ToolError> { Ok((p.a / p.b).to_string()) }
/// wasm_agent_guest::export_tools![
///     Tool::new("add", "Add two numbers.", add).read_only().idempotent(),
///     Tool::new("div", "Divide.", div),
/// ];
/// ```
///
/// The tools are built anew for each `list-tools` and `call` (literal names
/// and descriptions are not copied). A name that is not 1-64 characters of
/// `[a-zA-Z0-9_-]`, or a name used twice, traps `list-tools` with a message
/// naming it, so the host refuses the component.
#[macro_export]
macro_rules! export_tools {
    ($($tool:expr),+ $(,)?) => {
        struct __WasmAgentTools;

        impl $crate::bindings::exports::wasm_agent::tool::tool::Guest for __WasmAgentTools {
            fn list_tools(
            ) -> ::std::vec::Vec<$crate::bindings::exports::wasm_agent::tool::tool::ToolSpec> {
                $crate::__private::list_exported(&$crate::__private::toolkit_or_trap(
                    ::std::vec![$($tool),+],
                ))
            }

            fn call(
                name: ::std::string::String,
                arguments: ::std::string::String,
                context: $crate::bindings::exports::wasm_agent::tool::tool::CallContext,
            ) -> ::core::result::Result<
                $crate::bindings::exports::wasm_agent::tool::tool::ToolOutput,
                $crate::bindings::exports::wasm_agent::tool::tool::ToolError,
            > {
                $crate::__private::call_exported(&[$($tool),+], name, arguments, context)
            }
        }

        $crate::bindings::export!(__WasmAgentTools with_types_in $crate::bindings);
    };
}
