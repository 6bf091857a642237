"""Write wasm-agent tools in Python.

Decorate plain functions with :func:`tool`; their type hints and defaults
become the JSON Schema the model sees; the wasm-agent host checks the
arguments the model sends against it before the component runs, and the
helper decodes them for the function. Export them from the module that
componentize-py builds with ``Tool = Toolkit.export()``::

    from wasm_agent_tool import tool, Toolkit, Output, ToolError, host

    @tool(read_only=True, idempotent=True)
    def shout(text: str, times: int = 1) -> str:
        \"\"\"Upper-case a text.

        Args:
            text: The text to shout.
            times: How often to repeat it.
        \"\"\"
        return " ".join([text.upper()] * times)

    Tool = Toolkit.export()

A function returns a ``str`` or an :class:`Output`; raising :class:`ToolError`
fails the call with that message, any other exception fails it with
``"TypeName: message"``. Only ``MemoryError`` is left to crash the component,
so the host reports it as its memory limit.

Everything but :data:`host` also works in plain CPython, so handlers can be
unit-tested with ``Toolkit(my_tool).call("my_tool", '{"x": 1}')`` (which,
unlike the host, does not check the arguments).
"""

import gc
import heapq  # noqa: F401  collections.Counter.most_common imports it lazily
import json
import re
import sys
import traceback
import typing

from wasm_agent_schema import (coerce, docstring, expects_integer, json_type, signature_schema,
                               unwrap)

try:  # Present only when componentize-py builds the component.
    from wit_world import exports as _exports
    from wit_world.imports import host as _wit_host
    from componentize_py_types import Err as _Err
    try:
        from wit_world.imports import types as _wit
    except ImportError:  # A world with another `types` (wasi:http's) names ours in full.
        from wit_world.imports import wasm_agent_tool_types as _wit
except ImportError:  # Plain CPython, e.g. unit tests.
    _exports = _wit_host = _wit = _Err = None

__all__ = [
    "tool", "FunctionTool", "Toolkit", "Output", "Artifact", "ToolError",
    "ToolCallError", "InvalidArguments", "Context", "host", "coerce",
]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_REGISTERED = []


# ---------------------------------------------------------------- results


class ToolError(Exception):
    """The tool could not do its job; the message is read by the model."""

    kind = "failed"

    def __init__(self, message):
        super().__init__(message)
        self.message = str(message)


class ToolCallError(ToolError):
    """A call of another tool (:meth:`host.call_tool <_Host.call_tool>`) that
    did not succeed. ``error_kind`` is the host's kind (``capability_denied``,
    ``invalid_arguments``, ``denied``, ``failed``, ``timeout``, ...); raised
    on, it fails this tool's call with its message."""

    def __init__(self, tool, error_kind, message):
        super().__init__(f"{tool}: {error_kind}: {message}")
        self.tool = tool
        self.error_kind = error_kind
        self.detail = message


class InvalidArguments(ToolError):
    """Arguments that fit the schema but make no sense (e.g. an empty name)."""

    kind = "invalid-arguments"


class UnknownTool(ToolError):
    kind = "unknown-tool"


class Artifact:
    """Structured data for the application; the model never sees it."""

    __slots__ = ("kind", "mime_type", "data")

    def __init__(self, kind, data, mime_type=None):
        self.kind = kind
        self.data = data.encode() if isinstance(data, str) else bytes(data)
        self.mime_type = mime_type

    def __repr__(self):
        return f"Artifact({self.kind!r}, {self.mime_type!r}, {len(self.data)} bytes)"


class Output:
    """Text for the model plus artifacts for the application.

    ``Output("3 words").with_json("stats", {"words": 3})``; the ``with_``
    methods return the output, so they chain.
    """

    def __init__(self, content=""):
        self.content = str(content)
        self.artifacts = []

    def with_json(self, kind, value):
        """Adds ``value`` serialised as an ``application/json`` artifact."""
        data = json.dumps(value, ensure_ascii=False, allow_nan=False)
        return self.with_bytes(kind, "application/json", data)

    def with_bytes(self, kind, mime_type, data):
        """Adds raw ``data`` (bytes, or str as UTF-8) of the given media type."""
        self.artifacts.append(Artifact(kind, data, mime_type))
        return self

    def __repr__(self):
        return f"Output({self.content!r}, artifacts={self.artifacts!r})"


class Context:
    """Who and what a call is for. Annotate a parameter with it to receive it."""

    def __init__(self, run_id="", session_id="", user_id=None, tenant_id=None, metadata=None):
        self.run_id = run_id
        self.session_id = session_id
        self.user_id = user_id
        self.tenant_id = tenant_id
        self.metadata = metadata if isinstance(metadata, dict) else {}

    @classmethod
    def _from_wit(cls, context):
        try:
            metadata = {} if context.metadata == "{}" else json.loads(context.metadata)
        except ValueError:
            metadata = {}
        return cls(context.run_id, context.session_id, context.user_id,
                   context.tenant_id, metadata)

    def __repr__(self):
        return f"Context(run_id={self.run_id!r}, session_id={self.session_id!r})"


# ------------------------------------------------------------- decoding


def _decode(arguments):
    """The arguments JSON text as a dict; blank text and null mean ``{}``."""
    text = arguments.strip()
    if not text or text == "null":
        return {}
    # The C scanner alone: json.loads would run three Python functions and
    # make a decoder, and in a fresh instance each object touched is a page
    # written. json.loads runs only to say what is wrong.
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        end = None
    if end != len(text):
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError as error:
            raise InvalidArguments(f"arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        kind = {"array": "an array", "string": "a string", "boolean": "a boolean",
                "integer": "a number", "number": "a number"}[json_type(value)]
        raise InvalidArguments(f"arguments must be a JSON object, not {kind}")
    return value


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


_SCAN = json.JSONDecoder(parse_constant=_no_constant).scan_once


# ------------------------------------------------------------------ tools


class FunctionTool:
    """One tool: a function plus its name, description, schema and annotations.

    Made by :func:`tool`; calling it runs the undecorated function.
    """

    def __init__(self, function, name=None, description=None, schema=None,
                 read_only=False, destructive=False, idempotent=False, open_world=False):
        self.function = function
        self.name = name or function.__name__
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} is invalid: use 1-64 "
                             f"characters of [a-zA-Z0-9_-]")
        doc, param_docs = docstring(function)
        self.description = unwrap(description) if description else doc
        if schema is None:
            schema, self._context_param = signature_schema(function, param_docs, Context)
        else:
            hints = typing.get_type_hints(function)
            self._context_param = next((name for name, hint in hints.items()
                                        if hint is Context), None)
        self.schema = schema
        if not isinstance(self.schema, dict) or self.schema.get("type", "object") != "object":
            raise ValueError(f"{self.name}: the schema must describe a JSON object")
        self.parameters = json.dumps(self.schema, ensure_ascii=False)
        self._coerce = expects_integer(self.schema)
        self.annotations = {"read_only": read_only, "destructive": destructive,
                            "idempotent": idempotent, "open_world": open_world}
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def __repr__(self):
        return f"<tool {self.name}>"

    def run(self, arguments, context=None):
        """Decodes ``arguments`` (JSON text), runs the function and
        returns its :class:`Output`; errors are raised as :class:`ToolError`."""
        return _as_output(self._invoke(arguments, context))

    def _invoke(self, arguments, context):
        """What the function returns for ``arguments`` (JSON text)."""
        kwargs = _decode(arguments)
        if self._coerce:
            kwargs = coerce(kwargs, self.schema)
        if self._context_param:
            kwargs[self._context_param] = context or Context()
        return self.function(**kwargs)


def _as_output(result):
    """A function's result as an :class:`Output`."""
    if isinstance(result, Output):
        return result
    if result is None:
        return Output("")
    if isinstance(result, str):
        return Output(result)
    return Output(json.dumps(result, ensure_ascii=False, allow_nan=False))


def tool(function=None, *, name=None, description=None, schema=None, read_only=False,
         destructive=False, idempotent=False, open_world=False):
    """Makes a function a tool; use as ``@tool`` or ``@tool(...)``.

    ``name`` defaults to the function's name, ``description`` to its docstring
    up to its first section (``Args:``, ``Returns:``...); the ``Args:``
    entries describe the parameters.
    The schema comes from the type hints (str, int, float, bool, list[X],
    dict[str, X], X | None, Literal[...], Annotated[X, "description"]) and
    defaults (a parameter without one is required); pass ``schema=`` to give
    it yourself. A parameter annotated ``Context`` receives the call context.
    The annotations are hints for the host and the model.
    """
    def decorate(function):
        made = FunctionTool(function, name, description, schema, read_only, destructive,
                            idempotent, open_world)
        _REGISTERED.append(made)
        return made
    return decorate if function is None else decorate(function)


class Toolkit:
    """The tools one component exports, with unique, valid names."""

    def __init__(self, *tools):
        tools = list(tools) or list(_REGISTERED)
        if not tools:
            raise ValueError("a component must export at least one tool")
        self.tools = {}
        for item in tools:
            if not isinstance(item, FunctionTool):
                raise TypeError(f"{item!r} is not a tool; decorate it with @tool")
            if item.name in self.tools:
                raise ValueError(f"tool name {item.name!r} is used twice")
            self.tools[item.name] = item

    def call(self, name, arguments="{}", context=None):
        """Runs the tool ``name`` with JSON text ``arguments``; for unit tests."""
        return self._find(name).run(arguments, context)

    def _find(self, name):
        found = self.tools.get(name)
        if found is None:
            raise UnknownTool(f"this component has no tool named {json.dumps(name)}; "
                              f"it offers: {', '.join(self.tools)}")
        return found

    @classmethod
    def export(cls, *tools):
        """The class componentize-py needs: assign it to ``Tool`` in the app
        module. Exports the given tools, or every ``@tool`` defined so far.

        Outside componentize-py it returns the :class:`Toolkit` itself, so the
        app module still imports (and ``app.Tool.call(...)`` works) in tests."""
        toolkit = cls(*tools)
        return toolkit if _exports is None else _exported_class(toolkit)


def _annotation_flags():
    """The WIT annotation flags by the names tools use for them."""
    return {"read_only": _wit.Annotations.READ_ONLY,
            "destructive": _wit.Annotations.DESTRUCTIVE,
            "idempotent": _wit.Annotations.IDEMPOTENT,
            "open_world": _wit.Annotations.OPEN_WORLD}


def _exported_class(toolkit):
    flags = _annotation_flags()
    specs = []
    for item in toolkit.tools.values():
        annotations = _wit.Annotations(0)
        for key, flag in flags.items():
            if item.annotations[key]:
                annotations |= flag
        specs.append((item.name, item.description, item.parameters, annotations))

    class Exported(_exports.Tool):
        def list_tools(self):
            return [_wit.ToolSpec(*spec) for spec in specs]

        def call(self, name, arguments, context):
            return _call(toolkit, name, arguments, context)

    Exported.__name__ = Exported.__qualname__ = "Tool"
    _warm_up()
    return Exported


def _call(toolkit, name, arguments, context):
    """The export's ``call``: tool ``name`` run on ``arguments`` with the WIT
    ``context``, as a WIT tool output (or ``Err``)."""
    try:
        found = toolkit._find(name)
        result = found._invoke(arguments,
                               found._context_param and Context._from_wit(context))
        if type(result) is str:
            return _wit.ToolOutput(result, [])
        output = _as_output(result)
        artifacts = [_wit.Artifact(a.kind, a.mime_type, a.data) for a in output.artifacts]
        return _wit.ToolOutput(output.content, artifacts)
    except ToolError as error:
        raise _Err(_wit_error(error.kind, error.message)) from None
    except MemoryError:
        raise  # Trap, so that the host reports its memory limit.
    except Exception as error:
        try:
            host.debug(traceback.format_exc())
        except Exception:
            pass
        message = f"{type(error).__name__}: {error}".rstrip(": ")
        raise _Err(_wit_error("failed", message)) from None


# Calls the warm-up makes: the interpreter specialises code it has run a few times.
_WARM_UP_CALLS = 32


def _echo(text: str = "") -> str:
    """Returns the text."""
    return text


def _warm_up():
    """Readies the interpreter for the snapshot componentize-py takes once
    the app module is imported; a call in a fresh instance of it then
    writes fewer pages (every page written is copied first).

    The call path runs a few times on a tool of its own, context record
    included, so the snapshot holds that code specialised. Then every object
    so far is frozen, as before a fork: a collection during a call leaves
    them alone."""
    toolkit = Toolkit(FunctionTool(_echo))
    for _ in range(_WARM_UP_CALLS):
        context = _wit.CallContext("", "", None, None, "{}")
        _call(toolkit, "_echo", '{"text": "warm"}', context)
    gc.collect()
    gc.freeze()


def _wit_error(kind, message):
    if kind == "invalid-arguments":
        return _wit.ToolError_InvalidArguments(message)
    if kind == "unknown-tool":
        return _wit.ToolError_UnknownTool(message)
    return _wit.ToolError_Failed(message)


# ------------------------------------------------------------------- host


def _wit_host_or_fail():
    if _wit_host is None:
        raise RuntimeError("wasm_agent_tool.host only works inside a component")
    return _wit_host


class _State:
    """Session state of this tool, as JSON values under string keys."""

    def get(self, key, default=None):
        """The value stored under ``key``, or ``default``."""
        text = self.get_raw(key)
        if text is None:
            return default
        try:
            return json.loads(text)
        except ValueError as error:
            raise ToolError(f"session state {key!r} is not JSON: {error}") from None

    def set(self, key, value):
        """Stores ``value`` (anything ``json.dumps`` takes) under ``key``."""
        self.set_raw(key, json.dumps(value, ensure_ascii=False, allow_nan=False))

    def get_raw(self, key):
        """The JSON text stored under ``key``, or None."""
        return _wit_host_or_fail().get_state(key)

    def set_raw(self, key, text):
        """Stores JSON text under ``key`` as is."""
        _wit_host_or_fail().set_state(key, text)


class _Host:
    """What the host offers a tool besides WASI. Only logging works outside a
    component (it prints to stderr); the rest raises RuntimeError there."""

    LEVELS = ("trace", "debug", "info", "warn", "error")

    def __init__(self):
        self.state = _State()

    def log(self, level, message):
        """A log line at ``level`` ("trace", "debug", "info", "warn", "error").
        Outside a component it goes to stderr."""
        if level not in self.LEVELS:
            raise ValueError(f"log level must be one of {', '.join(self.LEVELS)}")
        if _wit_host is None:
            print(f"[{level}] {message}", file=sys.stderr)
        else:
            _wit_host.log(_wit_host.Level[level.upper()], str(message))

    def trace(self, message):
        self.log("trace", message)

    def debug(self, message):
        self.log("debug", message)

    def info(self, message):
        self.log("info", message)

    def warn(self, message):
        self.log("warn", message)

    def error(self, message):
        self.log("error", message)

    def dependency(self, name):
        """The value the operator configured for this tool under ``name``, or None."""
        return _wit_host_or_fail().dependency(name)

    def emit(self, name, payload=None):
        """Publishes event ``name`` with ``payload`` (a JSON value) on the host's bus."""
        _wit_host_or_fail().emit(name, json.dumps(payload, ensure_ascii=False, allow_nan=False))

    def cancelled(self):
        """True once the call was cancelled or hit its deadline; check it in long loops."""
        return _wit_host_or_fail().cancelled()

    def delegate(self, agent, input):
        """Hands a sub-task to the host's agent ``agent``; returns its answer or
        raises :class:`ToolError` saying why the host refused."""
        try:
            return _wit_host_or_fail().delegate(agent, input)
        except Exception as error:
            if _Err is not None and isinstance(error, _Err):
                raise ToolError(str(error.value)) from None
            raise


    def callable_tools(self):
        """The host's tools this tool may call with :meth:`call_tool` (those its
        policy grants in ``call_tools``), as dicts with ``name``,
        ``description``, ``parameters`` (the JSON Schema) and ``annotations``."""
        specs = []
        for spec in _wit_host_or_fail().callable_tools():
            try:
                parameters = json.loads(spec.parameters)
            except ValueError:
                parameters = {}
            flags = spec.annotations
            names = [name for name, flag in _annotation_flags().items() if flags & flag]
            specs.append({"name": spec.name, "description": spec.description,
                          "parameters": parameters, "annotations": names})
        return specs

    def call_tool(self, name, arguments=None, **kwargs):
        """Calls the host's tool ``name`` with ``arguments`` (a dict) or keyword
        arguments, on the path a call from the agent takes (validation,
        approval, that tool's policy); returns its :class:`Output`. Raises
        :class:`ToolCallError` (with the host's ``error_kind``) when it fails or
        this tool's policy does not grant it."""
        arguments = dict(arguments or {}, **kwargs)
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        try:
            output = _wit_host_or_fail().call_tool(name, text)
        except Exception as error:
            if _Err is not None and isinstance(error, _Err):
                raise ToolCallError(name, error.value.kind, error.value.message) from None
            raise
        result = Output(output.content)
        for artifact in output.artifacts:
            result.artifacts.append(Artifact(artifact.kind, artifact.data, artifact.mime_type))
        return result


host = _Host()
