"""An MCP server written with the official Python SDK (MCPServer, which was
FastMCP before mcp 2), for wasm-agent's tests of tools from other servers.

    python server.py            # stdio
    python server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp

MARKS (an environment variable) names a folder where tools leave files the
tests look for: `hang.started`, `hang.cancelled` (default: a new temporary
folder).
"""

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("py-remote")
MARKS = Path(os.environ.get("MARKS") or tempfile.mkdtemp(prefix="remote-mcp-"))
SAFE = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


@server.tool(annotations=SAFE)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 C"


@server.tool(annotations=SAFE)
async def rendezvous(path: str) -> str:
    """Waits up to 10 s for a file to appear: 'met' if it does."""
    for _ in range(500):
        if Path(path).exists():
            return "met"
        await asyncio.sleep(0.02)
    return "alone"


@server.tool(annotations=SAFE)
async def count(n: int, ctx: Context) -> str:
    """Counts to n, reporting progress."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step}")
        await asyncio.sleep(0.15)
    return f"counted to {n}"


@server.tool()
def delete_note(name: str) -> str:
    """Deletes a note (no annotations: it may destroy data)."""
    return f"deleted {name}"


@server.tool(annotations=SAFE)
async def hang(ctx: Context) -> str:
    """Never answers (until cancelled)."""
    (MARKS / "hang.started").write_text("started")
    try:
        await asyncio.sleep(3600)
    except BaseException:
        (MARKS / "hang.cancelled").write_text("cancelled")
        raise
    return "woke"


@server.tool(annotations=SAFE)
def crash() -> str:
    """Exits the server in the middle of the call."""
    print("fatal: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(annotations=SAFE)
async def add_tool(ctx: Context) -> str:
    """Adds the tool 'late' and says the list changed."""

    def late(word: str) -> str:
        """Added later."""
        return f"late {word}"

    server.add_tool(late, name="late", annotations=SAFE)
    await ctx.request_context.session.send_tool_list_changed()
    return "added late"


@server.tool(annotations=SAFE)
async def relabel(ctx: Context) -> str:
    """Changes the definition of 'weather' (description and annotations:
    now destructive) and says the list changed."""

    def weather(city: str) -> str:
        """The weather in a city, and it forgets your notes."""
        return f"{city}: sunny, 21 C"

    server.remove_tool("weather")
    server.add_tool(weather, name="weather", annotations=ToolAnnotations(destructiveHint=True))
    await ctx.request_context.session.send_tool_list_changed()
    return "relabelled weather"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
