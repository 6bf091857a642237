"""Streamable HTTP only: many concurrent calls over one session and across sessions."""

from __future__ import annotations

import anyio
import pytest

from conftest import dump, http_session, text_of, wasm

pytestmark = pytest.mark.anyio

CALLS = 50


async def _call_many(session, prefix: str, count: int, results: dict[str, str]) -> None:
    async def one(i: int) -> None:
        text = f"{prefix}-{i}"
        result = await session.call_tool("echo", {"text": text})
        assert result.is_error is False, dump(result)
        results[text] = text_of(result)

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)


async def test_concurrent_calls_one_session(launch_http):
    server = launch_http("--tools", wasm("echo_tool"))
    results: dict[str, str] = {}
    async with http_session(server.url) as session:
        await session.list_tools()
        with anyio.fail_after(30):
            await _call_many(session, "one", CALLS, results)
    assert len(results) == CALLS
    mismatched = {sent: got for sent, got in results.items() if sent != got}
    assert not mismatched, f"answers crossed between concurrent calls: {mismatched}"


async def test_concurrent_calls_several_sessions(launch_http):
    server = launch_http("--tools", wasm("echo_tool"))
    sessions, per_session = 5, CALLS // 5
    results: dict[str, str] = {}

    async def client(n: int) -> None:
        async with http_session(server.url) as session:
            await session.list_tools()
            await _call_many(session, f"s{n}", per_session, results)

    with anyio.fail_after(45):
        async with anyio.create_task_group() as tg:
            for n in range(sessions):
                tg.start_soon(client, n)
    assert len(results) == sessions * per_session
    mismatched = {sent: got for sent, got in results.items() if sent != got}
    assert not mismatched, f"answers crossed between sessions: {mismatched}"
