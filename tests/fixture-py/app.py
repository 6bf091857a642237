"""TEST-ONLY Python component for the host's tests: benign probes of the host
interface plus hostile behaviours (an endless loop, unbounded allocation, an
uncaught exception). Never ship it."""

import json
import random
import sys
from typing import Any

from wasm_agent_tool import Context, ToolError, Toolkit, host, tool


@tool(read_only=True, idempotent=True)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@tool
def fail(message: str = "this tool always fails") -> str:
    """Raise ToolError (kind failed)."""
    raise ToolError(message)


@tool
def crash() -> str:
    """Raise an exception that is not a ToolError."""
    return {}["missing"]


@tool
def spin() -> str:
    """Loop forever without checking for cancellation."""
    count = 0
    while True:
        count += 1


@tool
def spin_polite() -> str:
    """Loop until the host says the call is cancelled or past its deadline."""
    count = 0
    while not host.cancelled():
        count += 1
    return f"stopped after {count} iterations"


@tool
def alloc(chunk_kib: int = 1024) -> str:
    """Allocate memory in chunks until something stops it."""
    kept = []
    while True:
        kept.append(bytearray(chunk_kib * 1024))


@tool
def recurse() -> str:
    """Recurse without end (Python raises RecursionError)."""
    def down(depth):
        return down(depth + 1) + 1
    return str(down(0))


@tool
def state(key: str, value: Any = None) -> str:
    """Store a JSON value under key (if given), then read it back. Returns
    the value stored before and the value now, as JSON."""
    before = host.state.get(key)
    if value is not None:
        host.state.set(key, value)
    return json.dumps({"before": before, "now": host.state.get(key)})


@tool
def dependency(name: str) -> str:
    """Return the dependency value the operator configured, or <none>."""
    value = host.dependency(name)
    return "<none>" if value is None else value


@tool
def emit(name: str = "fixture.event", payload: Any = None) -> str:
    """Publish an event on the host's bus."""
    host.emit(name, payload if payload is not None else {"from": "fixture-py"})
    return "emitted"


@tool
def log(level: str = "info", message: str = "hello from fixture-py") -> str:
    """Write a log line."""
    host.log(level, message)
    return "logged"


@tool(read_only=True)
def context(ctx: Context) -> str:
    """Return the call context."""
    return json.dumps({"run_id": ctx.run_id, "session_id": ctx.session_id, "user_id": ctx.user_id,
                 "tenant_id": ctx.tenant_id, "metadata": ctx.metadata})


@tool(name="random", read_only=True)
def draw() -> str:
    """Draw three numbers with random.random() (the module was imported at build time)."""
    return json.dumps([random.random() for _ in range(3)])


@tool(read_only=True)
def version() -> str:
    """Return the Python version inside the component."""
    return sys.version


Tool = Toolkit.export()
