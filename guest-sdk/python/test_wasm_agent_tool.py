"""Unit tests of wasm_agent_tool under plain CPython (no WebAssembly).

Run from the repository root:

    target/mcp-venv/bin/pytest guest-sdk/python -q

Most tests go through ``Toolkit(tool).call(name, json_text)``, the documented
plain-CPython entry point. The component export (``Toolkit.export()`` under
componentize-py) and the ``host`` wrappers are tested against a second copy of
the module loaded with in-memory stand-ins for the ``wit_world`` bindings.
"""

import dataclasses
import enum
import importlib.util
import json
import pathlib
import sys
import types
from typing import Annotated, Any, Literal, Optional, Union

import pytest

import wasm_agent_tool as sdk
from wasm_agent_tool import (
    Context, FunctionTool, InvalidArguments, Output, ToolError, Toolkit, tool, coerce,
)

MODULE_PATH = pathlib.Path(__file__).with_name("wasm_agent_tool.py")


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """Every ``@tool`` appends to the module's ``_REGISTERED``; give each test
    an empty list so tests cannot see each other's tools."""
    monkeypatch.setattr(sdk, "_REGISTERED", [])


def call(made, arguments="{}", context=None):
    return Toolkit(made).call(made.name, arguments, context)


def invalid(made, arguments):
    """The message of the InvalidArguments that calling ``made`` raises."""
    with pytest.raises(InvalidArguments) as raised:
        call(made, arguments)
    assert raised.value.kind == "invalid-arguments"
    return raised.value.message


# ------------------------------------------------------------------ schema


def test_schema_of_every_simple_hint_with_defaults_and_docstring():
    @tool
    def sample(text: str, count: int, ratio: float, flag: bool, tags: list[str], extra: dict,
               limit: Optional[int] = None, mode: Literal["fast", "slow"] = "fast",
               size: Annotated[int, "Size in bytes.", {"minimum": 0}] = 10,
               verbose: bool = False) -> str:
        """Do a sample thing.

        Longer explanation that is
        wrapped over two lines.

        Args:
            text: The text to use.
            count (int): How many times,
                at most ten.
            size: Not used: Annotated already describes it.

        Returns:
            Something the model reads.
        """
        return text

    assert sample.name == "sample"
    assert sample.description == ("Do a sample thing.\n\n"
                                  "Longer explanation that is wrapped over two lines.")
    assert sample.schema == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to use."},
            "count": {"type": "integer", "description": "How many times, at most ten."},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object"},
            "limit": {"type": ["integer", "null"]},
            "mode": {"enum": ["fast", "slow"], "type": "string", "default": "fast"},
            "size": {"type": "integer", "description": "Size in bytes.", "minimum": 0,
                     "default": 10},
            "verbose": {"type": "boolean", "default": False},
        },
        "required": ["text", "count", "ratio", "flag", "tags", "extra"],
        "additionalProperties": False,
    }
    # The JSON text sent to the host is the same schema.
    assert json.loads(sample.parameters) == sample.schema


def test_schema_without_required_parameters_has_no_required_key():
    @tool
    def nothing() -> str:
        return ""

    assert nothing.schema == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object", "properties": {}, "additionalProperties": False,
    }
    assert nothing.description == ""


@pytest.mark.parametrize("hint, expected", [
    (int | None, {"type": ["integer", "null"]}),
    (Optional[str], {"type": ["string", "null"]}),
    (Optional[Literal["a", "b"]], {"enum": ["a", "b", None], "type": ["string", "null"]}),
    (Literal[1, "a"], {"enum": [1, "a"]}),
    (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
    (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (Optional[Union[int, str]],
     {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
    (list, {"type": "array"}),
    (list[list[int]], {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "minItems": 2, "maxItems": 2}),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict[str, Any], {"type": "object"}),
    (Any, {}),
    (Annotated[list[int], "Numbers."], {"type": "array", "items": {"type": "integer"},
                                        "description": "Numbers."}),
    (Optional[Annotated[int, "At most nine."]],
     {"type": ["integer", "null"], "description": "At most nine."}),
    (Annotated[Optional[int], {"maximum": 9}], {"type": ["integer", "null"], "maximum": 9}),
])
def test_schema_of_hint(hint, expected):
    def function(value):
        return ""
    function.__annotations__ = {"value": hint}
    assert FunctionTool(function).schema["properties"]["value"] == expected


def test_unannotated_parameter_accepts_anything_and_is_required():
    @tool
    def loose(value):
        return repr(value)

    assert loose.schema["properties"] == {"value": {}}
    assert loose.schema["required"] == ["value"]
    assert call(loose, '{"value": [1, {"a": null}]}').content == "[1, {'a': None}]"


def test_docstring_args_entry_does_not_override_annotated_description_but_fills_others():
    @tool
    def described(a: Annotated[str, "From Annotated."], b: str) -> str:
        """Describe.

        Arguments:
            a: From the docstring.
            b: Also from the docstring.
        """
        return a + b

    properties = described.schema["properties"]
    assert properties["a"]["description"] == "From Annotated."
    assert properties["b"]["description"] == "Also from the docstring."


def test_explicit_name_and_description_and_annotations():
    @tool(name="renamed-tool", description="  Line one\n  line two.  ", read_only=True,
          open_world=True)
    def original(x: int) -> str:
        """Ignored docstring."""
        return str(x)

    assert original.name == "renamed-tool"
    assert original.description == "Line one line two."
    assert original.annotations == {"read_only": True, "destructive": False,
                                    "idempotent": False, "open_world": True}
    # The decorated object is still callable as the plain function.
    assert original(5) == "5"
    assert original.__wrapped__(6) == "6"
    assert Toolkit(original).call("renamed-tool", '{"x": 2}').content == "2"


def test_explicit_schema_is_used_as_given():
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 2}},
              "required": ["q"]}

    @tool(schema=schema)
    def search(q, **rest):
        return q

    assert search.schema is schema
    assert json.loads(search.parameters) == schema
    assert call(search, '{"q": "ab", "other": 1}').content == "ab"  # no additionalProperties


def test_explicit_schema_must_describe_an_object():
    with pytest.raises(ValueError, match="must describe a JSON object"):
        @tool(schema={"type": "array"})
        def listy(items):
            return ""


def test_context_parameter_is_not_in_the_schema_and_receives_the_context():
    seen = []

    @tool
    def who(name: str, ctx: Context = None) -> str:
        seen.append(ctx)
        return f"{name} in {ctx.session_id or '-'}"

    assert list(who.schema["properties"]) == ["name"]
    assert who.schema["required"] == ["name"]
    assert call(who, '{"name": "Ada"}').content == "Ada in -"
    assert isinstance(seen[-1], Context) and seen[-1].metadata == {}
    context = Context(run_id="r", session_id="s1", metadata={"k": 1})
    assert call(who, '{"name": "Ada"}', context).content == "Ada in s1"
    assert seen[-1] is context
    # Context cannot be passed by the model: the host's is always the one given.
    assert call(who, '{"name": "Ada", "ctx": {}}', context).content == "Ada in s1"
    assert seen[-1] is context


@pytest.mark.parametrize("hint", [bytes, dict[int, str], complex])
def test_hints_without_a_json_schema_are_rejected_at_definition(hint):
    def function(value):
        return ""
    function.__annotations__ = {"value": hint}
    with pytest.raises(TypeError, match=r"function\(value\)"):
        FunctionTool(function)


@pytest.mark.parametrize("source", [
    "def f(*values: int): pass",
    "def f(**values: int): pass",
    "def f(value: int, /): pass",
])
def test_var_and_positional_only_parameters_are_rejected(source):
    namespace = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match="cannot be tool arguments"):
        tool(namespace["f"])


def test_defaults_that_are_not_json_are_left_out_of_the_schema():
    marker = object()

    @tool
    def odd(a: Any = marker, b: float = 0.5, c: Optional[int] = None) -> str:
        return "ok"

    properties = odd.schema["properties"]
    assert "default" not in properties["a"]
    assert properties["b"]["default"] == 0.5
    assert "default" not in properties["c"]
    assert "required" not in odd.schema


# ------------------------------------------------------------ tool names


@pytest.mark.parametrize("name", ["has space", "dot.ted", "naïve", "x" * 65, "a/b"])
def test_invalid_tool_names_are_rejected_at_definition(name):
    with pytest.raises(ValueError, match="is invalid"):
        @tool(name=name)
        def anything() -> str:
            return ""


def test_longest_valid_name_and_allowed_characters():
    name = "A-z_0" + "9" * 59
    assert len(name) == 64
    made = tool(name=name)(lambda: "")
    assert made.name == name


def test_duplicate_names_are_rejected_by_toolkit():
    first = tool(name="same")(lambda: "1")
    second = tool(name="same")(lambda: "2")
    with pytest.raises(ValueError, match="'same' is used twice"):
        Toolkit(first, second)
    # Also when taken from the registry.
    with pytest.raises(ValueError, match="used twice"):
        Toolkit()


def test_toolkit_rejects_undecorated_functions_and_empty_registry():
    def plain():
        return ""
    with pytest.raises(TypeError, match="decorate it with @tool"):
        Toolkit(plain)
    with pytest.raises(ValueError, match="at least one tool"):
        Toolkit()


def test_toolkit_without_arguments_and_export_use_registered_tools_in_order():
    @tool
    def b_tool() -> str:
        return "b"

    @tool
    def a_tool() -> str:
        return "a"

    assert list(Toolkit().tools) == ["b_tool", "a_tool"]
    exported = Toolkit.export()  # plain CPython: a Toolkit, not a component class
    assert isinstance(exported, Toolkit)
    assert exported.call("a_tool").content == "a"
    assert list(Toolkit.export(a_tool).tools) == ["a_tool"]


def test_unknown_tool():
    @tool
    def present() -> str:
        return ""

    @tool
    def other() -> str:
        return ""

    with pytest.raises(ToolError) as raised:
        Toolkit(present, other).call("absent", "{}")
    assert raised.value.kind == "unknown-tool"
    assert raised.value.message == ('this component has no tool named "absent"; '
                                    'it offers: present, other')


# ------------------------------------------------------------- decoding


@pytest.fixture
def shout():
    @tool
    def shout(text: str, times: int = 1, style: Literal["plain", "loud"] = "plain") -> str:
        """Upper-case a text."""
        return " ".join([text.upper()] * times)
    return shout


def test_valid_arguments_run_the_function(shout):
    assert call(shout, '{"text": "hi", "times": 2}').content == "HI HI"


def test_the_helper_does_not_validate_the_host_does():
    """One validator: arguments that break the schema reach the function as
    they are (the host refuses them before a component ever runs)."""
    seen = {}

    @tool
    def shout(text: str, style: Literal["plain", "loud"] = "plain") -> str:
        seen.update(text=text, style=style)
        return "ran"

    assert call(shout, '{"text": 5, "style": "quiet"}').content == "ran"
    assert seen == {"text": 5, "style": "quiet"}


def test_coercion_follows_any_of_tuples_and_maps():
    @tool
    def shapes(either: Union[int, list[int]], pair: tuple[str, int],
               counts: dict[str, int]) -> str:
        return json.dumps([either, pair, counts])

    assert call(shapes, '{"either": [1.0], "pair": ["a", 2.0], "counts": {"x": 3.0}}').content \
        == '[[1], ["a", 2], {"x": 3}]'
    assert coerce(3.0, {"type": "integer"}) == 3
    assert coerce(3.5, {"type": "integer"}) == 3.5
    assert coerce([1, "a"], True) == [1, "a"]


def test_integral_floats_become_ints_where_integers_are_expected():
    seen = {}

    @tool
    def numbers(n: int, xs: list[int], maybe: Optional[int], ratio: float) -> str:
        seen.update(n=n, xs=xs, maybe=maybe, ratio=ratio)
        return "ok"

    call(numbers, '{"n": 3.0, "xs": [1.0, 2], "maybe": 4.0, "ratio": 2.0}')
    assert seen == {"n": 3, "xs": [1, 2], "maybe": 4, "ratio": 2.0}
    assert type(seen["n"]) is int and type(seen["xs"][0]) is int and type(seen["maybe"]) is int
    assert type(seen["ratio"]) is float
    # An int is a valid number.
    call(numbers, '{"n": 1, "xs": [], "maybe": null, "ratio": 2}')
    assert seen["ratio"] == 2 and seen["maybe"] is None


@pytest.mark.parametrize("arguments", ["", "   ", "null", " null\n"])
def test_blank_or_null_arguments_mean_no_arguments(arguments):
    made = tool(name="noargs")(lambda: "ran")
    assert call(made, arguments).content == "ran"


@pytest.mark.parametrize("arguments, message", [
    ("[1]", "arguments must be a JSON object, not an array"),
    ('"x"', "arguments must be a JSON object, not a string"),
    ("3", "arguments must be a JSON object, not a number"),
    ("2.5", "arguments must be a JSON object, not a number"),
    ("true", "arguments must be a JSON object, not a boolean"),
])
def test_arguments_must_be_an_object(arguments, message):
    made = tool(name="noargs")(lambda: "")
    assert invalid(made, arguments) == message


@pytest.mark.parametrize("arguments", ["{", "{'a': 1}", '{"a": NaN}', '{"a": Infinity}'])
def test_arguments_that_are_not_json(arguments):
    made = tool(name="anyargs", schema={"type": "object"})(lambda **kw: "")
    assert invalid(made, arguments).startswith("arguments are not valid JSON: ")


def test_invalid_arguments_raised_by_the_function_keep_their_kind():
    @tool
    def picky(name: str) -> str:
        if not name:
            raise InvalidArguments("name must not be empty")
        return name

    with pytest.raises(InvalidArguments) as raised:
        call(picky, '{"name": ""}')
    assert raised.value.kind == "invalid-arguments"
    assert raised.value.message == "name must not be empty"
    assert isinstance(raised.value, ToolError)


# ---------------------------------------------------------------- results


def test_str_result_is_the_content_without_artifacts(shout):
    output = call(shout, '{"text": "x"}')
    assert isinstance(output, Output)
    assert output.content == "X"
    assert output.artifacts == []


@pytest.mark.parametrize("value, content", [
    (None, ""),
    ({"a": [1, "é"]}, '{"a": [1, "é"]}'),
    ([1, 2], "[1, 2]"),
    (3, "3"),
    (True, "true"),
])
def test_other_results_become_text(value, content):
    made = tool(name="returns")(lambda: value)
    assert call(made).content == content


def test_output_with_json_and_bytes_artifacts():
    @tool
    def stats(text: str) -> Output:
        return (Output(f"{len(text)} chars")
                .with_json("stats", {"chars": len(text), "word": "naïve"})
                .with_bytes("raw", "application/octet-stream", b"\x00\xffabc")
                .with_bytes("note", "text/plain", "héllo")
                .with_bytes("list", None, [1, 2, 3]))

    output = call(stats, '{"text": "abcd"}')
    assert output.content == "4 chars"
    assert [(a.kind, a.mime_type) for a in output.artifacts] == [
        ("stats", "application/json"), ("raw", "application/octet-stream"),
        ("note", "text/plain"), ("list", None)]
    assert all(type(a.data) is bytes for a in output.artifacts)
    stats_artifact = output.artifacts[0]
    assert json.loads(stats_artifact.data.decode("utf-8")) == {"chars": 4, "word": "naïve"}
    assert "naïve".encode("utf-8") in stats_artifact.data  # not \u-escaped
    assert output.artifacts[1].data == b"\x00\xffabc"
    assert output.artifacts[2].data == "héllo".encode("utf-8")
    assert output.artifacts[3].data == b"\x01\x02\x03"


def test_output_methods_chain_and_reject_non_json():
    output = Output(42)
    assert output.content == "42"
    assert output.with_json("a", [1]) is output
    assert output.with_bytes("b", "x/y", b"") is output
    with pytest.raises(ValueError):
        Output().with_json("nan", float("nan"))
    with pytest.raises(TypeError):
        Output().with_json("set", {1, 2})


def test_tool_error_propagates_with_kind_failed_and_its_message():
    @tool
    def failing() -> str:
        raise ToolError("the text has no words")

    with pytest.raises(ToolError) as raised:
        call(failing)
    assert type(raised.value) is ToolError
    assert raised.value.kind == "failed"
    assert raised.value.message == "the text has no words"
    assert str(raised.value) == "the text has no words"
    assert ToolError(404).message == "404"


def test_other_exceptions_propagate_unchanged_in_plain_cpython():
    @tool
    def broken() -> str:
        return {}["missing"]

    with pytest.raises(KeyError):
        call(broken)


# ------------------------------------------------------ host, plain CPython


def test_host_log_prints_to_stderr_outside_a_component(capsys):
    sdk.host.info("hello")
    sdk.host.log("error", 42)
    assert capsys.readouterr().err == "[info] hello\n[error] 42\n"
    with pytest.raises(ValueError, match="log level must be one of"):
        sdk.host.log("fatal", "x")


@pytest.mark.parametrize("use", [
    lambda host: host.state.get("k"),
    lambda host: host.state.set("k", 1),
    lambda host: host.dependency("d"),
    lambda host: host.emit("e", {}),
    lambda host: host.cancelled(),
    lambda host: host.delegate("agent", "input"),
])
def test_other_host_functions_raise_outside_a_component(use):
    with pytest.raises(RuntimeError, match="only works inside a component"):
        use(sdk.host)


# ------------------------------------------- inside a (simulated) component


@dataclasses.dataclass
class FakeCallContext:
    run_id: str = "run-1"
    session_id: str = "session-1"
    user_id: Optional[str] = None
    tenant_id: Optional[str] = None
    metadata: str = "{}"


class FakeErr(Exception):
    """componentize-py's Err: the error value of a result, raised."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


class FakeHost:
    """In-memory stand-in for wit_world.imports.host."""

    Level = enum.Enum("Level", "TRACE DEBUG INFO WARN ERROR")

    def __init__(self):
        self.logs = []
        self.state = {}
        self.dependencies = {}
        self.events = []
        self.is_cancelled = False
        self.agents = {}

    def log(self, level, message):
        self.logs.append((level, message))

    def get_state(self, key):
        return self.state.get(key)

    def set_state(self, key, value):
        assert isinstance(value, str)
        self.state[key] = value

    def dependency(self, name):
        return self.dependencies.get(name)

    def emit(self, name, payload):
        self.events.append((name, payload))

    def cancelled(self):
        return self.is_cancelled

    def delegate(self, agent, input):
        if agent not in self.agents:
            raise FakeErr(f"agent {agent!r} is not allowed")
        return self.agents[agent](input)


def fake_wit_types():
    module = types.ModuleType("wit_world.imports.types")

    class Annotations(enum.IntFlag):
        READ_ONLY = 1
        DESTRUCTIVE = 2
        IDEMPOTENT = 4
        OPEN_WORLD = 8

    def record(name, *fields):
        return dataclasses.make_dataclass(name, fields)

    module.Annotations = Annotations
    module.ToolSpec = record("ToolSpec", "name", "description", "parameters", "annotations")
    module.Artifact = record("Artifact", "kind", "mime_type", "data")
    module.ToolOutput = record("ToolOutput", "content", "artifacts")
    module.ToolError_InvalidArguments = record("ToolError_InvalidArguments", "value")
    module.ToolError_Failed = record("ToolError_Failed", "value")
    module.ToolError_UnknownTool = record("ToolError_UnknownTool", "value")
    return module


@pytest.fixture
def component(monkeypatch):
    """A fresh copy of the module that finds (fake) componentize-py bindings,
    plus the fake host and types it talks to."""
    host = FakeHost()
    wit_types = fake_wit_types()
    exports = types.ModuleType("wit_world.exports")
    exports.Tool = type("Tool", (), {})
    imports = types.ModuleType("wit_world.imports")
    imports.host, imports.types = host, wit_types
    world = types.ModuleType("wit_world")
    world.exports, world.imports = exports, imports
    cpt = types.ModuleType("componentize_py_types")
    cpt.Err = FakeErr
    for name, module in [("wit_world", world), ("wit_world.exports", exports),
                         ("wit_world.imports", imports), ("wit_world.imports.host", host),
                         ("wit_world.imports.types", wit_types),
                         ("componentize_py_types", cpt)]:
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("wasm_agent_tool_in_component", MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return types.SimpleNamespace(sdk=module, host=host, types=wit_types)


def exported(component, *functions, **options):
    made = [component.sdk.tool(**options)(function) for function in functions]
    cls = component.sdk.Toolkit.export(*made)
    assert isinstance(cls, type) and cls.__name__ == "Tool"
    assert issubclass(cls, sys.modules["wit_world.exports"].Tool)
    return cls()


def test_export_lists_tools_with_annotation_flags(component):
    def first(text: str) -> str:
        """First tool."""
        return text

    def second() -> str:
        """Second tool."""
        return ""

    sdk2 = component.sdk
    a = sdk2.tool(read_only=True, idempotent=True)(first)
    b = sdk2.tool(destructive=True, open_world=True)(second)
    specs = sdk2.Toolkit.export(a, b)().list_tools()
    flags = component.types.Annotations
    assert [(s.name, s.description, s.annotations) for s in specs] == [
        ("first", "First tool.", flags.READ_ONLY | flags.IDEMPOTENT),
        ("second", "Second tool.", flags.DESTRUCTIVE | flags.OPEN_WORLD),
    ]
    assert json.loads(specs[0].parameters) == a.schema


def test_export_call_returns_tool_output_with_artifacts(component):
    sdk2 = component.sdk

    def report(name: str, ctx: sdk2.Context = None) -> sdk2.Output:
        return (sdk2.Output(f"hi {name} from {ctx.session_id}, user {ctx.user_id}, "
                            f"meta {ctx.metadata}")
                .with_json("who", {"name": name}).with_bytes("png", "image/png", b"\x89PNG"))

    instance = exported(component, report)
    context = FakeCallContext(session_id="s9", user_id="u1", metadata='{"lang": "en"}')
    output = instance.call("report", '{"name": "Ada"}', context)
    assert output.content == "hi Ada from s9, user u1, meta {'lang': 'en'}"
    assert [(a.kind, a.mime_type, a.data) for a in output.artifacts] == [
        ("who", "application/json", b'{"name": "Ada"}'), ("png", "image/png", b"\x89PNG")]
    # Metadata that is not JSON becomes {}.
    output = instance.call("report", '{"name": "Bo"}', FakeCallContext(metadata="not json"))
    assert output.content.endswith("meta {}")


def err_of(instance, name, arguments="{}"):
    with pytest.raises(FakeErr) as raised:
        instance.call(name, arguments, FakeCallContext())
    return raised.value.value


def test_export_maps_errors_to_tool_error_variants(component):
    sdk2 = component.sdk

    def work(mode: Literal["fail", "invalid", "crash", "bare", "ok"]) -> str:
        if mode == "fail":
            raise sdk2.ToolError("could not do it")
        if mode == "invalid":
            raise sdk2.InvalidArguments("mode makes no sense today")
        if mode == "crash":
            raise ValueError("bad value")
        if mode == "bare":
            raise RuntimeError()
        return "done"

    instance = exported(component, work)
    t = component.types
    assert instance.call("work", '{"mode": "ok"}', FakeCallContext()).content == "done"
    assert err_of(instance, "work", '{"mode": "fail"}') == t.ToolError_Failed("could not do it")
    assert err_of(instance, "work", '{"mode": "invalid"}') == \
        t.ToolError_InvalidArguments("mode makes no sense today")
    assert err_of(instance, "work", '{"mode": "crash"}') == t.ToolError_Failed("ValueError: bad value")
    assert err_of(instance, "work", '{"mode": "bare"}') == t.ToolError_Failed("RuntimeError")
    assert err_of(instance, "nope") == t.ToolError_UnknownTool(
        'this component has no tool named "nope"; it offers: work')


def test_export_logs_the_traceback_of_unexpected_exceptions_at_debug(component):
    def crash() -> str:
        raise ZeroDivisionError("division by zero")

    instance = exported(component, crash)
    err_of(instance, "crash")
    [(level, message)] = component.host.logs
    assert level is component.host.Level.DEBUG
    assert "Traceback" in message and "ZeroDivisionError: division by zero" in message


def test_export_still_fails_cleanly_when_logging_fails(component):
    def crash() -> str:
        raise KeyError("k")

    def broken_log(level, message):
        raise OSError("log is gone")

    component.host.log = broken_log
    assert err_of(exported(component, crash), "crash") == \
        component.types.ToolError_Failed("KeyError: 'k'")


def test_export_lets_memory_error_trap(component):
    def hungry() -> str:
        raise MemoryError()

    with pytest.raises(MemoryError):
        exported(component, hungry).call("hungry", "{}", FakeCallContext())


def test_host_wrappers_inside_a_component(component):
    host, fake = component.sdk.host, component.host
    host.warn("careful")
    host.log("trace", 7)
    assert fake.logs == [(fake.Level.WARN, "careful"), (fake.Level.TRACE, "7")]

    assert host.state.get("missing") is None
    assert host.state.get("missing", default=5) == 5
    host.state.set("count", {"n": 1, "word": "ü"})
    assert fake.state["count"] == '{"n": 1, "word": "ü"}'
    assert host.state.get("count") == {"n": 1, "word": "ü"}
    host.state.set_raw("raw", "[1,2]")
    assert host.state.get_raw("raw") == "[1,2]" and host.state.get("raw") == [1, 2]
    assert host.state.get_raw("missing") is None
    fake.state["bad"] = "{oops"
    with pytest.raises(component.sdk.ToolError, match="session state 'bad' is not JSON"):
        host.state.get("bad")
    with pytest.raises(ValueError):
        host.state.set("nan", float("nan"))

    fake.dependencies["api_key"] = "secret"
    assert host.dependency("api_key") == "secret"
    assert host.dependency("other") is None

    host.emit("done", {"ok": True})
    host.emit("bare")
    assert fake.events == [("done", '{"ok": true}'), ("bare", "null")]

    assert host.cancelled() is False
    fake.is_cancelled = True
    assert host.cancelled() is True

    fake.agents["echo"] = lambda text: f"echo: {text}"
    assert host.delegate("echo", "hi") == "echo: hi"
    with pytest.raises(component.sdk.ToolError) as raised:
        host.delegate("stranger", "hi")
    assert raised.value.message == "agent 'stranger' is not allowed"
    fake.agents["broken"] = lambda text: 1 / 0
    with pytest.raises(ZeroDivisionError):
        host.delegate("broken", "hi")


def test_state_persists_across_calls_of_an_exported_tool(component):
    sdk2 = component.sdk

    def counter() -> str:
        count = sdk2.host.state.get("count", 0) + 1
        sdk2.host.state.set("count", count)
        return str(count)

    instance = exported(component, counter)
    assert [instance.call("counter", "", FakeCallContext()).content for _ in range(3)] == \
        ["1", "2", "3"]
    assert component.host.state == {"count": "3"}


# ------------------------------------------------------------------- bugs


