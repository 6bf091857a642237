"""Unit tests of wasm_agent_tool under plain CPython (no WebAssembly).

Run from the repository root:

    target/mcp-venv/bin/pytest guest-sdk/python -q

Most tests go through ``Toolkit(tool).call(name, json_text)``, the documented
plain-CPython entry point; ``test_wasm_agent_component.py`` tests the
component export and the ``host`` wrappers.
"""

import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest

import wasm_agent_tool as sdk
from wasm_agent_tool import (
    Context, FunctionTool, InvalidArguments, Output, ToolError, Toolkit, tool, coerce,
)
from wasm_agent_schema import expects_integer


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


def test_schemas_that_expect_an_integer_somewhere_are_found():
    assert expects_integer({"type": "integer"})
    assert expects_integer({"type": ["null", "integer"]})
    assert expects_integer({"type": "object", "properties": {"a": {"anyOf": [
        {"type": "string"}, {"type": "array", "items": {"type": "integer"}}]}}})
    assert not expects_integer({"type": "object", "properties": {
        "type": {"type": "string", "description": "integer"}, "x": {"type": "number"}}})
    assert not expects_integer(True)


def test_without_integers_in_the_schema_floats_stay_floats():
    seen = {}

    @tool
    def ratio(x: float, tags: dict[str, float]) -> str:
        seen.update(x=x, tags=tags)
        return "ok"

    call(ratio, '{"x": 2.0, "tags": {"a": 1.0}}')
    assert type(seen["x"]) is float and type(seen["tags"]["a"]) is float


@pytest.mark.parametrize("arguments, expected", [
    ('{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}),
    ('  {"a": "\\u00e9"}\n', {"a": "\u00e9"}),
    ('{"a": 1, "a": 2}', {"a": 2}),
    ('{"big": 123456789012345678901234567890}', {"big": 123456789012345678901234567890}),
])
def test_arguments_decode_as_json_does(arguments, expected):
    made = tool(name="anyargs", schema={"type": "object"})(lambda **kw: json.dumps(kw))
    assert json.loads(call(made, arguments).content) == expected


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


@pytest.mark.parametrize("arguments", ["{", "{'a': 1}", '{"a": NaN}', '{"a": Infinity}',
                                       '{"a": 1} {"b": 2}', '{"a": 1} x', '{"a": -Infinity}'])
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


# ------------------------------------------------------------------- bugs


