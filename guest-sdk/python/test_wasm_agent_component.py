"""Unit tests of wasm_agent_tool inside a (simulated) component: the
component export (``Toolkit.export()`` under componentize-py) and the
``host`` wrappers, against a second copy of the module loaded with in-memory
stand-ins for the ``wit_world`` bindings.

Run from the repository root:

    target/mcp-venv/bin/pytest guest-sdk/python -q
"""

import dataclasses
import enum
import gc
import importlib.util
import json
import pathlib
import sys
import types
from typing import Literal, Optional

import pytest

MODULE_PATH = pathlib.Path(__file__).with_name("wasm_agent_tool.py")


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
    module.CallContext = FakeCallContext
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
    yield types.SimpleNamespace(sdk=module, host=host, types=wit_types)
    gc.unfreeze()  # Exporting froze the test process's objects.


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


def test_export_call_returns_what_each_kind_of_result_becomes(component):
    class Text(str):
        pass

    results = {"plain": "x", "subclass": Text("y"), "none": None, "json": {"n": [1]}}

    def give(kind: str) -> str:
        return results[kind]

    instance = exported(component, give)
    contents = {kind: instance.call("give", json.dumps({"kind": kind}), FakeCallContext())
                for kind in results}
    assert {kind: (o.content, type(o.content), o.artifacts) for kind, o in contents.items()} == {
        "plain": ("x", str, []), "subclass": ("y", str, []), "none": ("", str, []),
        "json": ('{"n": [1]}', str, [])}


def test_export_warms_its_call_path_up_before_the_snapshot(component, monkeypatch):
    ran = []
    real = component.sdk._call
    monkeypatch.setattr(component.sdk, "_call",
                        lambda *args: ran.append(args[1]) or real(*args))
    def mine() -> str:
        raise AssertionError("the warm-up ran the component's tool")

    gc.unfreeze()
    exported(component, mine)
    # The warm-up runs a tool of its own, never the component's.
    assert ran == ["_echo"] * component.sdk._WARM_UP_CALLS
    # And the objects made so far are left out of collections.
    assert gc.get_freeze_count() > 0


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
