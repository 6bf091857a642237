"""Handshake, tool listing and a plain call, over stdio and streamable HTTP."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from conftest import REPO_ROOT, dump, text_of, wasm

pytestmark = pytest.mark.anyio


async def test_initialize(open_session):
    async with open_session("--tools", wasm("calculator")) as session:
        result = session.initialize_result
        assert result is not None
        assert result.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, dump(result)
        assert result.server_info.name == "wasm-agent", dump(result)
        assert result.server_info.version, dump(result)
        tools = result.capabilities.tools
        assert tools is not None, f"capabilities.tools missing: {dump(result)}"
        assert tools.list_changed is True, f"capabilities.tools.listChanged is not true: {dump(result)}"
        # The session is usable after the handshake.
        await session.send_ping()


async def test_list_tools_calculator(open_session):
    async with open_session("--tools", wasm("calculator")) as session:
        listing = await session.list_tools()
        by_name = {tool.name: tool for tool in listing.tools}
        assert set(by_name) == {"calculate"}, dump(listing)
        tool = by_name["calculate"]
        assert tool.title, f"no title: {dump(tool)}"
        assert tool.description and "arithmetic" in tool.description, dump(tool)
        schema = tool.input_schema
        assert schema.get("type") == "object", schema
        assert "expression" in schema.get("properties", {}), schema
        assert "expression" in schema.get("required", []), schema
        # example-tools/calculator declares `.idempotent()` only (it writes `ans` to session state).
        hints = tool.annotations
        assert hints is not None, dump(tool)
        assert hints.read_only_hint is False, dump(tool)
        assert hints.destructive_hint is False, dump(tool)
        assert hints.idempotent_hint is True, dump(tool)
        assert hints.open_world_hint is False, dump(tool)


@pytest.mark.parametrize(
    ("name", "read_only", "destructive", "idempotent", "open_world"),
    [
        ("echo", True, False, True, False),
        ("write_path", False, True, False, False),
        ("tcp_connect", False, False, False, True),
        ("spin", False, False, False, False),
    ],
)
async def test_annotations_follow_the_component(open_session, name, read_only, destructive, idempotent, open_world):
    """Each hint comes from the component's own flags (tests/fixture-tool), not a constant."""
    async with open_session("--tools", wasm("fixture_tool")) as session:
        listing = await session.list_tools()
        tool = next((t for t in listing.tools if t.name == name), None)
        assert tool is not None, f"{name} not listed: {sorted(t.name for t in listing.tools)}"
        hints = tool.annotations
        assert hints is not None, dump(tool)
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            read_only,
            destructive,
            idempotent,
            open_world,
        ), dump(tool)


async def test_call_calculate(open_session):
    async with open_session("--tools", wasm("calculator")) as session:
        result = await session.call_tool("calculate", {"expression": "2 * (3 + 4)"})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "14", dump(result)
        result = await session.call_tool("calculate", {"expression": "6 * 7"})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "42", dump(result)


async def test_several_components(open_session):
    """--tools repeated: every component's tools are offered and callable."""
    async with open_session("--tools", wasm("calculator"), "--tools", wasm("echo_tool")) as session:
        listing = await session.list_tools()
        assert {"calculate", "echo"} <= {t.name for t in listing.tools}, dump(listing)
        result = await session.call_tool("echo", {"text": "héllo ✓"})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "héllo ✓", dump(result)


async def test_arguments_reach_the_tool_in_the_order_sent(open_session):
    """Object keys are not re-ordered on the way: a table of rows {tool, ms}
    keeps its columns tool | ms (the JavaScript mdtable tool prints keys in
    the order it receives them)."""
    mdtable = REPO_ROOT / "target/polyglot/mdtable.wasm"
    async with open_session("--tools", mdtable) as session:
        rows = [{"tool": "calculate", "ms": 0.03}, {"tool": "text_stats", "ms": 1.2}]
        result = await session.call_tool("markdown_table", {"rows": rows})
        assert result.is_error is False, dump(result)
        header = text_of(result).splitlines()[0]
        assert header.replace(" ", "") == "|tool|ms|", dump(result)


async def test_an_unknown_cursor_is_invalid_params(open_session):
    """The server never hands out a cursor, so any cursor is an error, not the list."""
    async with open_session("--tools", wasm("calculator")) as session:
        with pytest.raises(MCPError) as raised:
            await session.list_tools(params=types.PaginatedRequestParams(cursor="bogus"))
        assert raised.value.code == INVALID_PARAMS, raised.value.message
        assert "cursor" in raised.value.message


async def test_an_unknown_tool_gets_a_did_you_mean(open_session):
    async with open_session("--tools", wasm("calculator")) as session:
        with pytest.raises(MCPError) as raised:
            await session.call_tool("calcualte", {"expression": "1"})
        assert raised.value.code == INVALID_PARAMS, raised.value.message
        assert 'did you mean "calculate"?' in raised.value.message


async def test_the_readme_inspector_tool_set_loads_without_clashes(open_session):
    """The files the book (docs/mcp.md) tells users to serve to the MCP Inspector."""
    release = REPO_ROOT / "target/wasm32-wasip2/release"
    polyglot = REPO_ROOT / "target/polyglot"
    files = [release / f"{n}.wasm" for n in ("calculator", "files", "json", "fetch", "weather")]
    files += [polyglot / "textstats.wasm", polyglot / "mdtable.wasm"]
    async with open_session("--tools", *files) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"calculate", "json_query", "text_stats", "markdown_table"} <= names, names
