"""A first start with Python and JavaScript components that are not compiled yet.

The server answers `initialize` at once and compiles in the background.
`tools/list` waits for the components (`--load-wait`, 50 s by default; the
TypeScript SDK's request timeout is 60 s, the Python SDK's unlimited). When
the wait is shorter than the compile, the listing holds what is loaded so far
(a Rust component named first is in within a second or two: the listing is
not empty) and the server sends notifications/tools/list_changed once the
rest are in:
the TypeScript SDK re-lists by itself, a Python SDK client re-lists when told.
Both paths are tried with both official SDKs.

Compiling the Python component takes many seconds on any machine (the
JavaScript one, on QuickJS, about one), so an `initialize` answered within
INITIALIZE_BOUND shows it did not wait for them.
The "lists once compiled" cases give a load wait far above any compile seen
(about 20 s on an idle machine, over 30 s on a loaded CI machine), so that
they test the waiting, not the machine's speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from conftest import BIN, REPO_ROOT, SCRUBBED_ENV, ListChanged, dump, names_of, text_of

pytestmark = pytest.mark.anyio

POLYGLOT = REPO_ROOT / "target/polyglot"
PYTHON, JAVASCRIPT = POLYGLOT / "fixture-py.wasm", POLYGLOT / "mdtable.wasm"
CALCULATOR = REPO_ROOT / "target/wasm32-wasip2/release/calculator.wasm"
# Some tools of each: the Python fixture's and the JavaScript table tool's.
TOOLS = {PYTHON: {"echo", "spin", "state"}, JAVASCRIPT: {"markdown_table", "markdown_toc"}, CALCULATOR: {"calculate"}}
# A wait the Rust component's compile fits in (and the JavaScript one's
# may), and the Python one's does not.
SHORT_WAIT = ("--load-wait", "5s")
INITIALIZE_BOUND = 2.0
# Waits for the "lists once compiled" cases: the Python SDK's client has no
# request timeout of its own (the fixture's read timeout is set above it); the
# TypeScript SDK's is 60 s.
PYTHON_SDK_WAIT, TYPESCRIPT_SDK_WAIT = 150, 55
TS_CLIENT = REPO_ROOT / "tests/mcp/ts/client.mjs"
ROWS = [{"tool": "calculate", "ms": 0.03}, {"tool": "text_stats", "ms": 1.2}]


def fresh_cache(tmp_path: Path) -> dict[str, str]:
    cache = tmp_path / "cold-cache"
    cache.mkdir()
    return {"WASM_AGENT_CACHE_DIR": str(cache), "WASM_AGENT_DATA_DIR": str(tmp_path / "data")}


def expected(*components: Path) -> set[str]:
    return set().union(*(TOOLS[c] for c in components))


def header_of(text: str) -> str:
    return text.splitlines()[0].replace(" ", "")


@asynccontextmanager
async def python_cold_start(tmp_path: Path, stdio_session, components: tuple[Path, ...], *flags: str):
    """A session on a fresh cache, checked to be initialized at once; yields
    it, its first listing, the time to that listing, and its list_changed
    counter."""
    changed = ListChanged()
    started = time.perf_counter()
    # The fixture opens the session with `initialize`, and times only that.
    async with stdio_session(
        "--tools",
        *components,
        *flags,
        env=fresh_cache(tmp_path),
        message_handler=changed.handler,
        read_timeout=PYTHON_SDK_WAIT + 30,
    ) as session:
        initialized = time.perf_counter() - started
        assert initialized < INITIALIZE_BOUND, f"initialize took {initialized:.1f} s: it waited for compiling"
        listing = names_of(await session.list_tools())
        yield session, listing, time.perf_counter() - started, changed


async def test_python_sdk_cold_start_lists_once_compiled(tmp_path: Path, stdio_session):
    components = (PYTHON, JAVASCRIPT)
    wait = ("--load-wait", f"{PYTHON_SDK_WAIT}s")
    async with python_cold_start(tmp_path, stdio_session, components, *wait) as (session, listing, listed, changed):
        assert expected(*components) <= listing, sorted(listing)
        assert listed > INITIALIZE_BOUND, f"compiled in {listed:.1f} s: too fast to show anything"
        result = await session.call_tool("markdown_table", {"rows": ROWS})
        assert header_of(text_of(result)) == "|tool|ms|", dump(result)
        assert changed.count == 0, "list_changed after a listing that was already complete"


async def test_python_sdk_cold_start_hears_list_changed_after_a_short_wait(tmp_path: Path, stdio_session):
    cold = python_cold_start(tmp_path, stdio_session, (CALCULATOR, PYTHON), *SHORT_WAIT)
    async with cold as (session, listing, _, changed):
        # Not empty: the Rust component is in; the Python one is compiling.
        assert listing == expected(CALCULATOR), f"listed {sorted(listing)}"
        with anyio.move_on_after(90):
            while not changed.count:
                await anyio.sleep(0.05)
        assert changed.count, "no notifications/tools/list_changed once the component was in"
        relisted = names_of(await session.list_tools())
        assert expected(PYTHON) <= relisted, sorted(relisted)
        result = await session.call_tool("echo", {"text": "late"})
        assert text_of(result) == "late", dump(result)


def typescript_cold_start(tmp_path: Path, server_env: dict[str, str], components, *flags: str) -> dict:
    if shutil.which("node") is None:
        pytest.skip("Node.js is needed for the TypeScript SDK")
    if not (TS_CLIENT.parent / "node_modules/@modelcontextprotocol/sdk").is_dir():
        pytest.fail("the TypeScript SDK is missing: run `make mcp-ts` (npm ci in tests/mcp/ts)")
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV} | server_env | fresh_cache(tmp_path)
    call = {"name": "markdown_table", "arguments": {"rows": ROWS}}
    server = [str(BIN), "serve", "--stdio", *flags, "--tools", *map(str, components)]
    finished = subprocess.run(
        ["node", str(TS_CLIENT), json.dumps(call), "--", *server], env=env, capture_output=True, text=True, timeout=150
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout.splitlines()[-1])
    # Node's own start of the child is part of this figure.
    assert report["initializeMs"] < INITIALIZE_BOUND * 1000, report
    assert report["result"]["isError"] is False, report["result"]
    assert header_of(report["result"]["content"][0]["text"]) == "|tool|ms|", report["result"]
    return report


def test_typescript_sdk_cold_start_lists_once_compiled(tmp_path: Path, server_env: dict[str, str]):
    components = (PYTHON, JAVASCRIPT)
    report = typescript_cold_start(tmp_path, server_env, components, "--load-wait", f"{TYPESCRIPT_SDK_WAIT}s")
    assert expected(*components) <= set(report["tools"]), report["tools"]
    assert report["listMs"] > INITIALIZE_BOUND * 1000, "compiled too fast to show anything"
    assert report["refreshed"] == [], report


def test_typescript_sdk_cold_start_refreshes_on_list_changed(tmp_path: Path, server_env: dict[str, str]):
    components = (CALCULATOR, PYTHON, JAVASCRIPT)
    report = typescript_cold_start(tmp_path, server_env, components, *SHORT_WAIT)
    # Not empty: the Rust component is in; the Python one is compiling.
    listed = set(report["tools"])
    assert expected(CALCULATOR) <= listed and not expected(PYTHON) & listed, f"listed {report['tools']}"
    # The SDK re-listed by itself on list_changed and then saw every tool.
    assert report["refreshed"] and report["refreshed"][-1] >= len(expected(*components)), report
