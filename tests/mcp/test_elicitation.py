"""Asking the client's user over MCP elicitation (the official Python SDK's
client answers): approvals of calls that need them, and `ask` grants (a host
on 127.0.0.1 the policy asks about). Over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from conftest import BIN, SCRUBBED_ENV, approval_config, dump, text_of, wasm

pytestmark = pytest.mark.anyio

CALC = {"expression": "2 * (3 + 4)"}


class Person:
    """The user behind the client: answers each question with `decision`
    (None: declines; "never": does not answer), noting what was asked."""

    def __init__(self, decision: str | None, delay: float = 0.0) -> None:
        self.decision, self.delay = decision, delay
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context, params):
        self.asked.append(params)
        if self.decision == "never":
            await anyio.sleep(3600)
        if self.decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": self.decision})

    def choices(self, index: int = 0) -> list[str]:
        schema = self.asked[index].requested_schema
        decision = schema["properties"]["decision"]
        return [option["const"] for option in decision["oneOf"]]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return approval_config(tmp_path)


def audited_calls(path: Path, count: int) -> list[dict]:
    """The call records of an audit log, once it holds `count` (it is
    written behind the calls)."""
    deadline = time.monotonic() + 10
    while True:
        text = path.read_text() if path.exists() else ""
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        calls = [record for record in records if record["event"] == "call"]
        if len(calls) >= count or time.monotonic() > deadline:
            return calls
        time.sleep(0.05)


async def test_the_user_allows_a_call_once(open_session, config, tmp_path):
    person = Person("allow_once")
    audit = tmp_path / "audit.jsonl"
    serve = ("--config", config, "--audit", audit)
    async with open_session(*serve, elicitation_callback=person) as session:
        for _ in range(2):
            result = await session.call_tool("calculate", CALC)
            assert result.is_error is False, dump(result)
            assert text_of(result) == "14", dump(result)
        other = await session.call_tool("echo", {"text": "no approval needed"})
        assert other.is_error is False, dump(other)
    # Asked before each call of the tool that needs it, and only of it.
    assert len(person.asked) == 2, person.asked
    message = person.asked[0].message
    assert "calculate" in message and "2 * (3 + 4)" in message, message
    assert person.choices() == ["allow_once", "deny"]
    approvals = [record["approval"] for record in audited_calls(audit, 3) if record["tool"] == "calculate"]
    assert len(approvals) == 2, approvals
    assert approvals[0] == {
        "decision": "approved",
        "by": "the MCP client's user (elicitation)",
        "answer": "allowed_once",
    }, approvals


async def test_the_user_denies_and_the_model_hears_no_way_to_answer(open_session, config):
    person = Person(None)
    async with open_session("--config", config, elicitation_callback=person) as session:
        result = await session.call_tool("calculate", CALC)
    assert result.is_error is True, dump(result)
    text = text_of(result)
    assert "did not approve" in text and "14" not in text, text
    for hint in ("allow_once", "elicitation", "--approve", "accept"):
        assert hint not in text, text
    assert len(person.asked) == 1


async def test_a_call_that_could_not_run_is_not_asked_about(open_session, config):
    person = Person("allow_once")
    async with open_session("--config", config, elicitation_callback=person) as session:
        result = await session.call_tool("calculate", {"expression": 7})
    assert result.is_error is True, dump(result)
    assert "invalid_arguments" in dump(result) or "expression" in text_of(result), dump(result)
    assert person.asked == [], "asked to approve arguments the tool would refuse"


async def test_no_answer_in_time_denies(open_session, config):
    person = Person("never")
    async with open_session("--config", config, "--ask-wait", "1s", elicitation_callback=person) as session:
        started = time.monotonic()
        result = await session.call_tool("calculate", CALC)
        waited = time.monotonic() - started
        assert result.is_error is True, dump(result)
        assert "did not answer" in text_of(result) and "1s" in text_of(result), dump(result)
        assert waited < 10, f"waited {waited:.1f} s for an answer bounded at 1 s"
        # The server goes on answering.
        other = await session.call_tool("echo", {"text": "still here"})
        assert text_of(other) == "still here", dump(other)


async def test_allowed_for_the_session_is_not_asked_again_in_that_session(open_session, config):
    person = Person("allow_session")
    async with open_session("--config", config, "--ask-session", elicitation_callback=person) as session:
        for _ in range(3):
            result = await session.call_tool("calculate", CALC)
            assert text_of(result) == "14", dump(result)
    assert len(person.asked) == 1, person.asked
    assert person.choices() == ["allow_once", "allow_session", "deny"]


async def test_allowed_for_the_session_covers_exactly_the_arguments_asked_about(open_session, config):
    # The decisive part after 400 characters of padding: shown, and a call
    # that differs only there is asked about again.
    person = Person("allow_session")
    padded = lambda expression: {"expression": " " * 400 + expression}  # noqa: E731
    async with open_session("--config", config, "--ask-session", elicitation_callback=person) as session:
        for expression, answer in [("1+1", "2"), ("1+1", "2"), ("2+2", "4")]:
            result = await session.call_tool("calculate", padded(expression))
            assert text_of(result) == answer, dump(result)
    assert len(person.asked) == 2, person.asked
    second = person.asked[1].message
    assert "2+2" in second and "too long to show in full" in second, second
    assert "sha256:" in second, second
    decision = person.asked[0].requested_schema["properties"]["decision"]
    titles = [option["title"] for option in decision["oneOf"]]
    assert "Allow these exact arguments for this session" in titles, titles


async def test_the_operators_approval_is_not_asked_about(open_session, config):
    person = Person(None)
    async with open_session("--config", config, "--approve", "calculate", elicitation_callback=person) as session:
        result = await session.call_tool("calculate", CALC)
        assert text_of(result) == "14", dump(result)
    assert person.asked == []


class Page(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the standard library's name)
        body = b"hello from loopback"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


@pytest.fixture
def page():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("decision", ["allow_once", None])
async def test_an_ask_grant_reaches_the_host_only_when_allowed(open_session, page, decision, tmp_path):
    person = Person(decision)
    audit = tmp_path / "audit.jsonl"
    serve = ("--tools", wasm("fetch"), "--ask", page, "--timeout", "2s", "--audit", audit)
    async with open_session(*serve, elicitation_callback=person) as session:
        result = await session.call_tool("fetch", {"url": f"{page}/notes.txt"})
    assert len(person.asked) == 1, person.asked
    assert f"connect to {page}" in person.asked[0].message, person.asked[0].message
    if decision == "allow_once":
        assert result.is_error is False, dump(result)
        assert "hello from loopback" in text_of(result), dump(result)
    else:
        assert result.is_error is True, dump(result)
        assert result.structured_content["error"]["kind"] == "capability_denied", dump(result)
        assert "hello" not in text_of(result), dump(result)
    [record] = audited_calls(audit, 1)
    [asked] = record["asked"]
    assert asked["answer"] == ("allowed_once" if decision else "denied"), record
    assert f"connect to {page}" in asked["question"], record


async def test_the_time_spent_asking_is_not_the_tools(open_session, page):
    """The tool's timeout is 2 s; the user takes 3 s to answer."""

    class Slow(Person):
        async def __call__(self, context, params):
            await anyio.sleep(3)
            return await super().__call__(context, params)

    person = Slow("allow_once")
    serve = ("--tools", wasm("fetch"), "--ask", page, "--timeout", "2s")
    async with open_session(*serve, elicitation_callback=person) as session:
        result = await session.call_tool("fetch", {"url": page})
    assert result.is_error is False, dump(result)
    assert "hello from loopback" in text_of(result), dump(result)


async def test_without_elicitation_an_ask_grant_stays_denied(open_session, page):
    serve = ("--tools", wasm("fetch"), "--ask", page)
    async with open_session(*serve) as session:
        result = await session.call_tool("fetch", {"url": page})
    assert result.is_error is True, dump(result)
    assert result.structured_content["error"]["kind"] == "capability_denied", dump(result)
    assert "nobody can be asked" in text_of(result), dump(result)


@pytest.mark.parametrize("decision", ["allow_once", None])
async def test_an_ask_folder_is_opened_only_when_allowed(open_session, tmp_path, decision):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("private notes")
    person = Person(decision)
    serve = ("--tools", wasm("files"), "--ask", f"{docs}:/docs:ro")
    async with open_session(*serve, elicitation_callback=person) as session:
        result = await session.call_tool("read_file", {"path": "/docs/notes.txt"})
    assert len(person.asked) == 1, person.asked
    message = person.asked[0].message
    assert "read the folder" in message and str(docs.resolve()) in message, message
    if decision == "allow_once":
        assert text_of(result) == "private notes", dump(result)
    else:
        assert result.is_error is True, dump(result)
        assert "private notes" not in text_of(result), dump(result)


TS_CLIENT = Path(__file__).parent / "ts/client.mjs"


@pytest.mark.parametrize("decision", ["allow_once", "decline"])
def test_the_typescript_sdk_answers_too(tmp_path: Path, server_env: dict[str, str], decision):
    """The official TypeScript SDK's client, over stdio, as the one asked."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is needed for the TypeScript SDK")
    config = approval_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV} | server_env | {"ELICIT": decision}
    call = {"name": "calculate", "arguments": CALC}
    server = [str(BIN), "serve", "--stdio", "--config", str(config)]
    finished = subprocess.run(
        ["node", str(TS_CLIENT), json.dumps(call), "--", *server], env=env, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout.splitlines()[-1])
    assert len(report["elicited"]) == 1 and "calculate" in report["elicited"][0], report
    result = report["result"]
    if decision == "allow_once":
        assert result["isError"] is False and result["content"][0]["text"] == "14", result
    else:
        assert result["isError"] is True and "did not approve" in result["content"][0]["text"], result
