"""Cancellation, progress and --watch (notifications/tools/list_changed), over both transports."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from conftest import ListChanged, dump, names_of, text_of, wasm

pytestmark = pytest.mark.anyio

FIXTURE = ("--tools", wasm("fixture_tool"))


async def test_cancel_stops_the_call(open_session):
    """Cancelling an in-flight call frees the server's only slot (--max-concurrency 1).

    In SDK 2.x, cancelling the scope around `call_tool` makes the session send
    `notifications/cancelled` for that request id (the "courtesy cancel").
    """
    async with open_session(*FIXTURE, "--max-concurrency", "1") as session:
        # Listed up front so call_tool's output-schema check makes no extra tools/list later.
        await session.list_tools()
        sleep_outcome: list[object] = []
        async with anyio.create_task_group() as tg:
            sleep_scope = anyio.CancelScope()

            async def sleeper() -> None:
                with sleep_scope:
                    sleep_outcome.append(await session.call_tool("sleep", {"ms": 60_000}, read_timeout_seconds=120))

            tg.start_soon(sleeper)
            await anyio.sleep(1.0)

            # Control: while the sleep holds the only slot, another call cannot succeed.
            control: list[types.CallToolResult] = []
            with anyio.move_on_after(1.5):
                control.append(await session.call_tool("echo", {"text": "queued"}))
            early = list(sleep_outcome)
            sleep_scope.cancel()  # sends notifications/cancelled for the sleep's request id

        assert not early, f"sleep 60000 ms returned early: {early}"
        assert not (control and control[0].is_error is False), (
            "an echo call succeeded while a 60 s sleep was in flight under --max-concurrency 1: "
            f"{dump(control[0])}"
        )

        started = time.monotonic()
        with anyio.move_on_after(5) as scope:
            after = await session.call_tool("echo", {"text": "after cancel"})
        assert not scope.cancelled_caught, (
            "echo did not complete within 5 s after cancelling the sleep: "
            "the cancelled call still holds the only slot (notifications/cancelled not honoured)"
        )
        assert after.is_error is False and text_of(after) == "after cancel", dump(after)
        assert time.monotonic() - started < 5
        assert not sleep_outcome, f"the cancelled sleep still produced a result: {sleep_outcome}"


async def test_progress_for_long_calls(open_session):
    updates: list[tuple[float, float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((time.monotonic(), progress, total, message))

    async with open_session(*FIXTURE) as session:
        started = time.monotonic()
        result = await session.call_tool("sleep", {"ms": 2500}, progress_callback=on_progress)
        assert result.is_error is False and text_of(result) == "slept", dump(result)
    assert updates, "no notifications/progress during a 2.5 s call made with a progressToken"
    assert len(updates) <= 6, f"too many progress notifications for 2.5 s (about one a second expected): {updates}"
    values = [progress for _, progress, _, _ in updates]
    assert all(b > a for a, b in zip(values, values[1:])), f"progress must increase: {values}"
    assert updates[0][0] - started >= 0.5, f"first progress after {updates[0][0] - started:.2f}s, expected ~1 s"


async def test_no_progress_for_quick_calls(open_session):
    updates: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append(progress)

    async with open_session(*FIXTURE) as session:
        result = await session.call_tool("echo", {"text": "fast"}, progress_callback=on_progress)
        assert text_of(result) == "fast", dump(result)
    assert updates == [], f"progress sent for a call far shorter than 1 s: {updates}"


async def test_watch_sends_list_changed(open_session, tmp_path: Path, copy_component):
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    copy_component("calculator", tools_dir)
    seen = ListChanged()
    async with open_session("--tools", tools_dir, "--watch", message_handler=seen.handler) as session:
        assert names_of(await session.list_tools()) == {"calculate"}

        since = seen.count
        copy_component("echo_tool", tools_dir)
        names = await seen.wait_for_tools(session, since, lambda n: "echo" in n, "echo_tool.wasm added")
        assert names == {"calculate", "echo"}, names
        result = await session.call_tool("echo", {"text": "hot-loaded"})
        assert text_of(result) == "hot-loaded", dump(result)

        since = seen.count
        (tools_dir / "echo_tool.wasm").unlink()
        names = await seen.wait_for_tools(session, since, lambda n: "echo" not in n, "echo_tool.wasm removed")
        assert names == {"calculate"}, names

        # Changed in place: calculator.wasm now holds the echo component.
        since = seen.count
        staged = tmp_path / "replacement.part"
        staged.write_bytes(wasm("echo_tool").read_bytes())
        os.replace(staged, tools_dir / "calculator.wasm")
        names = await seen.wait_for_tools(session, since, lambda n: "calculate" not in n, "calculator.wasm replaced")
        assert names == {"echo"}, names
