"""`serve --code-mode`: clients see one tool, run_code (Python on Monty by
default), whose description lists the tools its code may call; those are
called from the code, each down the pipeline, and not offered directly.
The person's approval of a script's call is asked with elicitation."""

from __future__ import annotations

import subprocess

import pytest
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from conftest import BIN, approval_config, dump, text_of, wasm

pytestmark = pytest.mark.anyio
from test_elicitation import Person

TOOLS = ("--tools", wasm("calculator"), "--tools", wasm("json"), "--tools", wasm("run_monty"))
SCRIPT = (
    "import asyncio, json\n"
    "total, who = await asyncio.gather(calculate(expression='6 * 7'), json_query(document='{\"who\": \"ada\"}', path='who'))\n"
    "print(json.loads(who), total)"
)


async def test_clients_see_run_code_listing_the_tools_and_its_script_calls_them(open_session):
    async with open_session("--code-mode", *TOOLS) as session:
        listing = (await session.list_tools()).tools
        assert [tool.name for tool in listing] == ["run_code"], listing
        description = listing[0].description
        assert "- await calculate(expression: str) -> str" in description, description
        assert "- await json_query(document: str, path: str" in description, description
        assert "run_monty" not in description, description
        result = await session.call_tool("run_code", {"code": SCRIPT})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "stdout:\nada 42", dump(result)
        # The tools are the code's: not offered to the client directly.
        with pytest.raises(MCPError) as raised:
            await session.call_tool("calculate", {"expression": "1"})
        assert raised.value.code == INVALID_PARAMS, raised.value.message
        assert "run_code" in raised.value.message, raised.value.message


async def test_a_scripts_call_that_needs_approval_is_asked_with_elicitation(open_session, tmp_path):
    config = approval_config(tmp_path, f'[tools.run_monty]\ncomponent = "{wasm("run_monty")}"\n')
    person = Person("allow_once")
    async with open_session("--code-mode=monty", "--config", config, elicitation_callback=person) as session:
        code = "await calculate(expression='6 * 7')"
        result = await session.call_tool("run_code", {"code": code})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "value:\n'42'", dump(result)
        assert len(person.asked) == 1 and "calculate" in person.asked[0].message, person.asked


def test_code_mode_without_its_interpreter_is_refused_at_start():
    done = subprocess.run(
        [BIN, "serve", "--stdio", "--code-mode=cpython", "--tools", wasm("calculator"), "--tools", wasm("run_monty")],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "code mode needs an interpreter tool: load run_python.wasm with --tools" in done.stderr, done.stderr
    assert "panicked" not in done.stderr, done.stderr


def test_a_hidden_tool_is_unknown_whatever_the_request_carries(launch_http):
    from test_input_required import call

    server = launch_http("--code-mode", *TOOLS)
    # The calculator keeps state: a hidden one must not be told apart from
    # a tool that does not exist, not even by a `_session` handle.
    for arguments in ({"expression": "1", "_session": "made-up"}, {"expression": "1"}):
        message = call(server.url, "any", arguments, tool="calculate")
        assert "error" in message, message
        assert "there is no tool named \"calculate\"" in message["error"]["message"], message
        assert "run_code" in message["error"]["message"], message
