//! One segment of a script: from its start, or from its state with the
//! answers of its calls, to its end or its next pause.
//!
//! Tool calls are async functions: a call the script makes becomes a
//! pending future and the script goes on; when every task waits (one
//! `await`, or `asyncio.gather` of several calls), the segment pauses with
//! all the calls made, which the host runs together. A script that uses a
//! call's result without `await` (and so fails, or ends with the call never
//! made) is taken back to that call, which no host has run yet, and from
//! then on each call is answered before the script goes on.

use monty::{Dump, MontyRun, RunProgress, Session, SessionRef, dump};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    PrintWriter, PrintWriterCallback, ResourceLimits, ResourceTracker,
};

use crate::exports::wasm_agent::tool::script::{Pause, Step, ToolRequest, ToolResponse};
use crate::state::{Callable, Printed, State, Waiting};
use crate::wasm_agent::tool::types::{ToolError, ToolOutput, ToolSpec};
use crate::{clock, convert, output};

/// The script's name in tracebacks.
const SCRIPT: &str = "script.py";
/// Calls any tool by name: `await call_tool("name", {...})`.
const CALL_TOOL: &str = "call_tool";

/// Starts `code` with `tools` to call.
pub fn start(code: String, tools: &[ToolSpec]) -> Result<Step, ToolError> {
    if let Some(name) = redefined(&code, tools) {
        return Err(ToolError::Failed(format!(
            "the script defines {name}(), which is a tool the host provides: do not define \
             the tools, call them: `result = await {name}(...)`"
        )));
    }
    let mut segment = Segment {
        printed: Printed::default(),
        tools: tools.iter().map(callable).collect(),
        sync: false,
        issued: Vec::new(),
    };
    let runner = match MontyRun::new(code, SCRIPT, Vec::new(), CompileOptions::default()) {
        Ok(runner) => runner,
        Err(error) => return segment.failed(&error),
    };
    let progress = runner.start(Vec::new(), tracker(), segment.print());
    segment.drive(progress)
}

/// Goes on with the script in `state`, given the answers of its calls.
pub fn resume(state: &[u8], responses: Vec<ToolResponse>) -> Result<Step, ToolError> {
    let State {
        run,
        printed,
        tools,
        sync,
        waiting,
    } = State::decode(state).map_err(ToolError::Failed)?;
    let mut segment = Segment {
        printed,
        tools,
        sync,
        issued: Vec::new(),
    };
    let Session::Running(progress) = Dump::load(&run)
        .map_err(|e| ToolError::Failed(format!("the script's state does not load: {e}")))?
        .state
    else {
        return Err(ToolError::Failed(
            "the script's state is not a paused run".into(),
        ));
    };
    let results = responses.into_iter().map(|response| {
        let result = match response.output {
            Ok(text) => ExtFunctionResult::Return(MontyObject::String(text)),
            Err(error) => ExtFunctionResult::Error(MontyException::new(
                ExcType::RuntimeError,
                Some(format!(
                    "tool call failed ({}): {}",
                    error.kind, error.message
                )),
            )),
        };
        (response.id, result)
    });
    let progress = match (waiting, *progress) {
        (Waiting::Futures, RunProgress::ResolveFutures(futures)) => {
            futures.resume(results.collect(), segment.print())
        }
        (Waiting::Call, RunProgress::FunctionCall(call)) => {
            let Some((_, result)) = results.into_iter().find(|(id, _)| *id == call.call_id) else {
                return Err(ToolError::Failed(
                    "the answer of the call the script waits for is missing".into(),
                ));
            };
            call.resume(result, segment.print())
        }
        _ => {
            return Err(ToolError::Failed(
                "the script's state does not match what it waits for".into(),
            ));
        }
    };
    segment.drive(progress)
}

/// The first tool the script defines a function of its own for (models
/// write stubs of the tools they were shown, which would shadow them).
fn redefined<'a>(code: &str, tools: &'a [ToolSpec]) -> Option<&'a str> {
    code.lines().find_map(|line| {
        let line = line.trim_start();
        let defined = line
            .strip_prefix("async def ")
            .or_else(|| line.strip_prefix("def "))?;
        let name = defined.split('(').next()?.trim();
        tools
            .iter()
            .find(|tool| tool.name == name)
            .map(|tool| tool.name.as_str())
    })
}

/// No limits of Monty's own: wasmtime bounds time, fuel, memory and stack.
fn tracker() -> ResourceTracker {
    ResourceTracker::new(ResourceLimits::default())
}

fn callable(spec: &ToolSpec) -> Callable {
    let schema: serde_json::Value = serde_json::from_str(&spec.parameters).unwrap_or_default();
    let required = schema.get("required").and_then(|r| r.as_array());
    let positional = match required.map(Vec::as_slice) {
        Some([serde_json::Value::String(only)]) => Some(only.clone()),
        _ => None,
    };
    Callable {
        name: spec.name.clone(),
        positional,
    }
}

/// A call made in this segment, not yet run by the host: where to take the
/// script back to if it used the call's result without `await`.
struct Issued {
    request: ToolRequest,
    /// The run paused at the call.
    at_call: Vec<u8>,
    /// What had been printed then.
    printed: Printed,
}

struct Segment {
    printed: Printed,
    tools: Vec<Callable>,
    sync: bool,
    issued: Vec<Issued>,
}

impl PrintWriterCallback for Printed {
    fn stdout_write(&mut self, output: std::borrow::Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output);
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        self.push(end.encode_utf8(&mut [0; 4]));
        Ok(())
    }
}

impl Segment {
    fn print(&mut self) -> PrintWriter<'_> {
        PrintWriter::Callback(&mut self.printed)
    }

    fn drive(
        mut self,
        mut progress: Result<RunProgress, MontyException>,
    ) -> Result<Step, ToolError> {
        loop {
            let step = match progress {
                Ok(step) => step,
                Err(_) if !self.issued.is_empty() => return Ok(self.take_back()),
                Err(error) => return self.failed(&error),
            };
            progress = match step {
                RunProgress::NameLookup(lookup) => {
                    let result = if self.offers(&lookup.name) {
                        NameLookupResult::Value(MontyObject::Function {
                            name: lookup.name.clone(),
                            docstring: None,
                        })
                    } else {
                        NameLookupResult::Undefined
                    };
                    lookup.resume(result, self.print())
                }
                RunProgress::FunctionCall(call) => {
                    let request = match self.request_of(&call) {
                        Ok(request) => request,
                        Err(error) => {
                            progress = call.resume(ExtFunctionResult::Error(error), self.print());
                            continue;
                        }
                    };
                    let paused = RunProgress::FunctionCall(call);
                    let at_call = self.dump(&paused)?;
                    if self.sync {
                        return Ok(self.pause(at_call, Waiting::Call, vec![request]));
                    }
                    let RunProgress::FunctionCall(call) = paused else {
                        unreachable!("a function call stays one");
                    };
                    self.issued.push(Issued {
                        request,
                        at_call,
                        printed: self.printed.clone(),
                    });
                    call.resume_pending(self.print())
                }
                RunProgress::ResolveFutures(futures) => {
                    let pending = futures.pending_call_ids();
                    let calls: Vec<ToolRequest> = self
                        .issued
                        .iter()
                        .filter(|issued| pending.contains(&issued.request.id))
                        .map(|issued| issued.request.clone())
                        .collect();
                    if calls.is_empty() {
                        return Err(ToolError::Failed(
                            "the script waits for something no tool call will answer".into(),
                        ));
                    }
                    let state = self.dump(&RunProgress::ResolveFutures(futures))?;
                    return Ok(self.pause(state, Waiting::Futures, calls));
                }
                RunProgress::OsCall(call) => {
                    let answer = clock::answer(&call.function_call);
                    call.resume(answer, self.print())
                }
                RunProgress::Complete(_) if !self.issued.is_empty() => {
                    return Ok(self.take_back());
                }
                RunProgress::Complete(value) => {
                    return Ok(Step::Done(ToolOutput {
                        content: output::render(&self.printed, &value),
                        artifacts: Vec::new(),
                    }));
                }
            };
        }
    }

    /// Whether `name` is a function the script may call.
    fn offers(&self, name: &str) -> bool {
        name == CALL_TOOL || self.tools.iter().any(|tool| tool.name == name)
    }

    /// The tool call `call` stands for, or the exception it raises.
    fn request_of(&self, call: &monty::FunctionCall) -> Result<ToolRequest, MontyException> {
        let type_error = |message: String| MontyException::new(ExcType::TypeError, Some(message));
        if call.object_id.is_some() {
            return Err(type_error(format!(
                "{} is not a method",
                call.function_name
            )));
        }
        let (name, args) = if call.function_name == CALL_TOOL {
            match call.args.split_first() {
                Some((MontyObject::String(name), rest)) => (name.clone(), rest),
                _ => {
                    return Err(type_error(
                        "call_tool(name, arguments): the tool's name comes first, as a str".into(),
                    ));
                }
            }
        } else {
            (call.function_name.clone(), call.args.as_slice())
        };
        let Some(tool) = self.tools.iter().find(|tool| tool.name == name) else {
            return Err(self.not_a_tool(&name));
        };
        let mut arguments = serde_json::Map::new();
        match args {
            [] => {}
            [MontyObject::Dict(_)] if call.kwargs.is_empty() => {
                let serde_json::Value::Object(object) =
                    convert::to_json(&args[0]).map_err(type_error)?
                else {
                    unreachable!("a dict is an object");
                };
                arguments = object;
            }
            [value] if tool.positional.is_some() => {
                let key = tool.positional.clone().unwrap_or_default();
                arguments.insert(key, convert::to_json(value).map_err(type_error)?);
            }
            _ => {
                return Err(type_error(format!(
                    "{name}() takes keyword arguments (or one dict of them), not positional ones"
                )));
            }
        }
        for (key, value) in &call.kwargs {
            let MontyObject::String(key) = key else {
                return Err(type_error("keyword names must be strings".into()));
            };
            arguments.insert(key.clone(), convert::to_json(value).map_err(type_error)?);
        }
        Ok(ToolRequest {
            id: call.call_id,
            name,
            arguments: serde_json::Value::Object(arguments).to_string(),
        })
    }

    /// The `NameError` of a call of `name`, which is no tool the script may
    /// call, naming those it may.
    fn not_a_tool(&self, name: &str) -> MontyException {
        let offered = if self.tools.is_empty() {
            "this script may call no tools".to_string()
        } else {
            let names: Vec<&str> = self.tools.iter().map(|tool| tool.name.as_str()).collect();
            format!("the tools this script may call: {}", names.join(", "))
        };
        MontyException::new(
            ExcType::NameError,
            Some(format!("name {name:?} is not defined ({offered})")),
        )
    }

    /// The script used a call's result without `await`: back to the first
    /// such call, which is answered before the script goes on, as every
    /// call after it will be.
    fn take_back(mut self) -> Step {
        let first = self.issued.remove(0);
        self.printed = first.printed;
        self.sync = true;
        self.pause(first.at_call, Waiting::Call, vec![first.request])
    }

    fn pause(self, run: Vec<u8>, waiting: Waiting, calls: Vec<ToolRequest>) -> Step {
        let state = State {
            run,
            printed: self.printed,
            tools: self.tools,
            sync: self.sync,
            waiting,
        };
        Step::Paused(Pause {
            state: state.encode(),
            calls,
        })
    }

    fn dump(&self, progress: &RunProgress) -> Result<Vec<u8>, ToolError> {
        dump(SCRIPT, None, SessionRef::Running(progress))
            .map_err(|e| ToolError::Failed(format!("the script's state does not serialize: {e}")))
    }

    fn failed(&self, error: &MontyException) -> Result<Step, ToolError> {
        let traceback = error.to_string();
        let hint = traceback.contains("coroutine").then_some(
            "Tools are async functions: write `result = await tool_name(key=value)`, and \
             `await asyncio.gather(...)` to run several at once.",
        );
        Err(ToolError::Failed(output::failure(
            &self.printed,
            &traceback,
            hint,
        )))
    }
}
