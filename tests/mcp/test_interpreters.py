"""run_python and run_javascript served over MCP: a model's code runs in the
sandbox, its output and files come back, and hostile code is an error result
after which the server answers the next call."""

from __future__ import annotations

import os
import subprocess

import mcp_types as types
import pytest

from conftest import BIN, REPO_ROOT, approval_config, dump, http_session, text_of

pytestmark = pytest.mark.anyio

PYTHON = REPO_ROOT / "target/polyglot/run_python.wasm"
JAVASCRIPT = REPO_ROOT / "target/polyglot/run_javascript.wasm"


@pytest.fixture(scope="module", autouse=True)
def compiled(server_env):
    """Compile both interpreters into the session's cache before any server
    starts: these tests are about calls, and on a loaded machine a cold
    compile of 17 MiB components can outlast a request's timeout.
    (Cold starts have their own tests in test_cold_start.py.)"""
    env = {**os.environ, **server_env}
    subprocess.run([BIN, "tools", PYTHON, JAVASCRIPT], env=env, check=True, capture_output=True, timeout=900)


async def test_code_runs_and_its_output_value_and_files_come_back(open_session):
    async with open_session("--tools", PYTHON, "--tools", JAVASCRIPT, "--scratch") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == {"run_python", "run_javascript"}
        assert listed["run_python"].input_schema["required"] == ["code"]

        code = "import json\nopen('rows.json', 'w').write(json.dumps([1, 2]))\nprint('wrote')\n6 * 7"
        result = await session.call_tool("run_python", {"code": code})
        assert result.is_error is False, dump(result)
        text = text_of(result)
        assert text.startswith("stdout:\nwrote\n\nvalue:\n42"), text
        assert "rows.json (6 bytes)" in text, text
        files = [b for b in result.content if isinstance(b, types.EmbeddedResource)]
        assert len(files) == 1, dump(result)
        assert files[0].resource.mime_type == "application/json"
        assert result.structured_content == {"file:rows.json": [1, 2]}, dump(result)

        result = await session.call_tool("run_javascript", {"code": "[3, 1, 2].sort()"})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "value:\n[1, 2, 3]"


@pytest.mark.parametrize(
    ("tool", "code", "needle"),
    [
        ("run_python", "while True: pass", "timeout"),
        ("run_python", "import socket", "No module named 'socket'"),
        ("run_python", "x = bytearray(1 << 30)", "memory"),
        ("run_javascript", "while (true) {}", "timeout"),
        ("run_javascript", "await fetch('http://127.0.0.1:9/')", "--allow-host http://127.0.0.1:9"),
    ],
)
async def test_hostile_code_is_an_error_result_and_the_server_goes_on(open_session, tool, code, needle):
    async with open_session("--tools", PYTHON, "--tools", JAVASCRIPT, "--timeout", "1s") as session:
        result = await session.call_tool(tool, {"code": code})
        assert result.is_error is True, dump(result)
        assert needle in text_of(result), dump(result)
        again = await session.call_tool(tool, {"code": "1 + 1"})
        assert again.is_error is False, dump(again)
        assert text_of(again) == "value:\n2", dump(again)


@pytest.fixture
def code_config(tmp_path):
    """run_python may call calculate, which needs approval, and echo, which does not."""
    return approval_config(
        tmp_path,
        f"""
[tools.run_python]
component = "{PYTHON}"
call_tools = ["calculate", "echo"]
""",
    )


CALLS_BOTH = (
    "print(tools.echo(text='hi'))\n"
    "try:\n"
    "    print(tools.calculate(expression='6 * 7'))\n"
    "except ToolCallError as error:\n"
    "    print(error.error_kind, error.detail)\n"
)


async def test_code_mode_calls_take_the_approval_step_of_direct_calls(open_session, code_config):
    async with open_session("--config", code_config) as session:
        result = await session.call_tool("run_python", {"code": CALLS_BOTH})
        assert result.is_error is False, dump(result)
        text = text_of(result)
        assert text.startswith("stdout:\nhi\ndenied"), text
        assert "--approve calculate" in text, text
    async with open_session("--config", code_config, "--approve", "calculate") as session:
        result = await session.call_tool("run_python", {"code": CALLS_BOTH})
        assert text_of(result) == "stdout:\nhi\n42", dump(result)


async def test_code_mode_refuses_a_tool_the_policy_does_not_grant(open_session, code_config):
    async with open_session("--config", code_config) as session:
        result = await session.call_tool("run_python", {"code": "tools.json_query(document='{}', path='a')"})
        assert result.is_error is True, dump(result)
        assert result.structured_content["error"]["kind"] == "capability_denied", dump(result)
        assert "--allow-call-tool json_query" in text_of(result), dump(result)


async def test_notebook_sessions_keep_variables_per_mcp_session(launch_http):
    """With --keep-instance, each MCP session's interpreter keeps its variables;
    another session starts empty."""
    server = launch_http("--tools", PYTHON, "--keep-instance")
    async with http_session(server.url) as first, http_session(server.url) as second:
        result = await first.call_tool("run_python", {"code": "data = [3, 1, 4, 1, 5]"})
        assert result.is_error is False, dump(result)
        result = await first.call_tool("run_python", {"code": "import statistics\nstatistics.median(data)"})
        assert text_of(result) == "value:\n3", dump(result)
        result = await second.call_tool("run_python", {"code": "data"})
        assert result.is_error is True, dump(result)
        assert "NameError" in text_of(result), dump(result)
