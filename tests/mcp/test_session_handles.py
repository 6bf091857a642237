"""Tool state across calls for sessionless (2026-07-28) clients: a tool that
keeps something between calls (session state, a kept notebook instance) is
listed with an optional `_session` argument; a call without one starts a
session whose handle comes with the result, and passing it back continues
that session, on any replica, for its caller alone."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import REPO_ROOT, dump, wasm
from servers import HAProxy, tokens_file
from test_input_required import TOKENS, ready, sessionless

pytestmark = pytest.mark.anyio

PYTHON = REPO_ROOT / "target/polyglot/run_python.wasm"
HANDLE = re.compile(r'pass "_session": "([^"]+)" in the next call')


def client(url: str, token: str, http: httpx2.AsyncClient) -> Client:
    return Client(streamable_http_client(url, http_client=http), mode="2026-07-28")


def handle_of(result) -> str:
    text = "\n".join(block.text for block in result.content if hasattr(block, "text"))
    found = HANDLE.search(text)
    assert found, dump(result)
    assert result.meta["io.wasm-agent/session"] == found.group(1), dump(result)
    return found.group(1)


def first_text(result) -> str:
    return result.content[0].text


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    import os

    path = tmp_path / "keys.toml"
    path.write_text(f'[[keys]]\nid = "one"\nsecret = "{os.urandom(32).hex()}"\n')
    return path


async def test_handles_carry_state_across_replicas_and_only_for_their_caller(launch_http, postgres, keys, tmp_path):
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    args = ("--tools", wasm("fixture_tool"), wasm("fetch"), "--store", postgres.url, "--tokens", tokens,
            "--request-state-keys", keys)
    replicas = [ready(launch_http(*args)) for _ in range(2)]
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    try:
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}, timeout=30) as http, \
                client(proxy.url, "alice-token", http) as alice:
            listing = {tool.name: tool for tool in (await alice.list_tools()).tools}
            assert "_session" in listing["state_set"].input_schema["properties"], listing["state_set"]
            assert "_session" in listing["state_get"].input_schema["properties"]
            assert "_session" not in listing["fetch"].input_schema.get("properties", {})

            written = await alice.call_tool("state_set", {"key": "k", "value": 7})
            assert first_text(written) == "ok", dump(written)
            handle = handle_of(written)
            # Passed back, on whichever replica: the same session.
            for _ in range(2):
                read = await alice.call_tool("state_get", {"key": "k", "_session": handle})
                assert first_text(read) == "7", dump(read)
            # Left out: a new session, with a handle of its own.
            fresh = await alice.call_tool("state_get", {"key": "k"})
            assert first_text(fresh) == "null", dump(fresh)
            assert handle_of(fresh) != handle
            # A tool that keeps nothing gets no handle.
            fetched = await alice.call_tool("fetch", {"url": "http://127.0.0.1:9/"})
            assert fetched.is_error is True, dump(fetched)
            assert not any("_session" in getattr(b, "text", "") for b in fetched.content), dump(fetched)
            # A changed or made-up handle is refused.
            with pytest.raises(Exception, match="_session refused"):
                await alice.call_tool("state_get", {"key": "k", "_session": handle[:-2] + "AA"})
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer bob-token"}, timeout=30) as http, \
                client(proxy.url, "bob-token", http) as bob:
            with pytest.raises(Exception, match="not a handle this server gave this caller"):
                await bob.call_tool("state_get", {"key": "k", "_session": handle})
    finally:
        proxy.close()


async def test_a_notebook_keeps_its_variables_through_a_handle(launch_http, keys):
    if not PYTHON.exists():
        pytest.skip("run_python is built by make setup (make polyglot)")
    server = ready(launch_http("--tools", PYTHON, "--keep-instance", "--request-state-keys", keys))
    async with httpx2.AsyncClient(timeout=60) as http, client(server.url, "", http) as notebook:
        first = await notebook.call_tool("run_python", {"code": "data = [3, 1, 4, 1, 5]"})
        assert first.is_error is False, dump(first)
        handle = handle_of(first)
        median = await notebook.call_tool(
            "run_python", {"code": "import statistics\nstatistics.median(data)", "_session": handle}
        )
        assert median.is_error is False, dump(median)
        assert "3" in first_text(median), dump(median)
        elsewhere = await notebook.call_tool("run_python", {"code": "data"})
        assert "NameError" in "\n".join(b.text for b in elsewhere.content if hasattr(b, "text")), dump(elsewhere)


async def test_a_call_asked_about_keeps_the_session_it_started(launch_http, keys, tmp_path):
    """The calculator keeps `ans` and needs approval: the question's round
    trip ends in the session the first request started, whose handle comes
    with the result; the next call, passing it, sees `ans`."""
    from conftest import approval_config
    from test_elicitation import Person

    server = ready(launch_http("--config", approval_config(tmp_path), "--request-state-keys", keys))
    person = Person("allow_once")
    async with sessionless(server.url, person) as calc:
        first = await calc.call_tool("calculate", {"expression": "2 * 3"})
        assert first_text(first) == "6", dump(first)
        handle = handle_of(first)
        again = await calc.call_tool("calculate", {"expression": "ans + 1", "_session": handle})
        assert first_text(again) == "7", dump(again)
    assert len(person.asked) == 2, person.asked
