"""Tool failures come back as results with isError; an unknown tool is a JSON-RPC error."""

from __future__ import annotations

import base64
import json
import re
import time

import mcp_types as types
import pytest
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from conftest import dump, text_of, wasm

pytestmark = pytest.mark.anyio

FIXTURE = ("--tools", wasm("fixture_tool"))


def assert_one_line_error(result: types.CallToolResult) -> str:
    assert result.is_error is True, f"expected isError true: {dump(result)}"
    text = text_of(result)
    assert text.strip(), f"error result without text: {dump(result)}"
    assert "\n" not in text.strip(), f"error text is not one line: {text!r}"
    return text


async def test_timeout(open_session):
    async with open_session(*FIXTURE, "--timeout", "300ms") as session:
        started = time.monotonic()
        result = await session.call_tool("spin", {})
        elapsed = time.monotonic() - started
        text = assert_one_line_error(result)
        assert re.search(r"time ?out|time limit", text, re.I), text
        assert elapsed < 10, f"spin under --timeout 300ms took {elapsed:.1f}s"
        # The server goes on serving after a timed-out call.
        after = await session.call_tool("echo", {"text": "still here"})
        assert after.is_error is False and text_of(after) == "still here", dump(after)


async def test_denied_tcp_connect(open_session):
    async with open_session(*FIXTURE) as session:
        result = await session.call_tool("tcp_connect", {"addr": "127.0.0.1:9"})
        text = assert_one_line_error(result)
        assert re.search(r"denied|not granted|not in the policy|allow-host", text, re.I), text
        assert "127.0.0.1:9" in text, text


async def test_denied_file_read(open_session):
    """No directory granted: /etc/passwd cannot be read and nothing of it leaks."""
    async with open_session(*FIXTURE) as session:
        result = await session.call_tool("read_path", {"path": "/etc/passwd"})
        text = assert_one_line_error(result)
        assert "/etc/passwd" in text, text
        assert "root:" not in json.dumps(result.model_dump(mode="json")), dump(result)


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({"expr": "1"}, "expression"),  # missing required property, unknown one
        ({"expression": 5}, "expression"),  # wrong type
    ],
)
async def test_invalid_arguments(open_session, arguments, mentions):
    async with open_session("--tools", wasm("calculator")) as session:
        result = await session.call_tool("calculate", arguments)
        text = assert_one_line_error(result)
        assert mentions in text, text
        assert re.search(r"invalid|schema|argument", text, re.I), text


async def test_trap_is_a_result(open_session):
    """A panicking tool fails its call with the panic message; the server survives."""
    async with open_session(*FIXTURE) as session:
        result = await session.call_tool("panic", {"message": "boom-4711"})
        text = assert_one_line_error(result)
        assert "boom-4711" in text, text
        after = await session.call_tool("echo", {"text": "ok"})
        assert after.is_error is False and text_of(after) == "ok", dump(after)


async def test_unknown_tool_is_invalid_params(open_session):
    async with open_session("--tools", wasm("calculator")) as session:
        with pytest.raises(MCPError) as caught:
            await session.call_tool("no_such_tool", {})
        assert caught.value.code == INVALID_PARAMS, f"code {caught.value.code}: {caught.value.message}"
        assert "no_such_tool" in caught.value.message, caught.value.message
        # The session survives the error.
        result = await session.call_tool("calculate", {"expression": "1 + 1"})
        assert text_of(result) == "2", dump(result)


async def test_artifacts(open_session):
    async with open_session(*FIXTURE) as session:
        result = await session.call_tool("artifacts", {})
        assert result.is_error is False, dump(result)
        assert "ok" in [b.text for b in result.content if isinstance(b, types.TextContent)], dump(result)

        images = [b for b in result.content if isinstance(b, types.ImageContent)]
        assert len(images) == 1, f"expected one ImageContent: {dump(result)}"
        assert images[0].mime_type == "image/png", dump(result)
        assert base64.b64decode(images[0].data) == b"\x89PNG\r\n\x1a\n", dump(result)

        expected = {"answer": 42, "items": [1, 2, 3]}
        carriers = []
        if result.structured_content is not None:
            assert result.structured_content == expected, dump(result)
            carriers.append("structuredContent")
        for block in result.content:
            if isinstance(block, types.EmbeddedResource) and block.resource.mime_type == "application/json":
                resource = block.resource
                raw = resource.text if isinstance(resource, types.TextResourceContents) else base64.b64decode(resource.blob)
                assert json.loads(raw) == expected, dump(result)
                carriers.append("resource")
        assert carriers, f"the JSON artifact is neither structuredContent nor an application/json resource: {dump(result)}"
