"""`serve --http` on the wire: raw requests, no SDK in between.

The sessions of the handshake revisions are wasm-agent's own; these pin
what an SDK would hide: JSON bodies for plain answers and an event stream
only for a call that asked for progress, the session's lifetime (404 once
it ended or expired, one GET stream at a time), the refusals of malformed
requests, and the 2026-07-28 revision (no session), which goes to rmcp's
service. The TypeScript SDK is tried over HTTP too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import httpx2
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from conftest import REPO_ROOT, SCRUBBED_ENV, approval_config, wasm

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META_2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
TS_CLIENT = REPO_ROOT / "tests/mcp/ts/client.mjs"


def rpc(id_: int, method: str, params: dict | None = None) -> dict:
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZE = rpc(
    0,
    "initialize",
    {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
)


class Raw:
    """One raw session: initialize, then requests with its session id."""

    def __init__(self, url: str, capabilities: dict | None = None) -> None:
        self.url = url
        self.http = httpx2.Client(timeout=30)
        initialize = INITIALIZE | {"params": INITIALIZE["params"] | {"capabilities": capabilities or {}}}
        opened = self.http.post(url, json=initialize, headers=HEADERS)
        assert opened.status_code == 200, describe(opened)
        assert opened.headers["content-type"].startswith("application/json"), describe(opened)
        assert opened.json()["result"]["serverInfo"]["name"] == "wasm-agent", describe(opened)
        self.session = opened.headers["mcp-session-id"]
        self.headers = HEADERS | {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION}
        notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status_code == 202, describe(notified)

    def post(self, message: dict, **headers: str) -> httpx2.Response:
        return self.http.post(self.url, json=message, headers=self.headers | headers)

    def close(self) -> None:
        self.http.close()


def describe(response: httpx2.Response) -> str:
    return f"HTTP {response.status_code} {dict(response.headers)} {response.text[:300]!r}"


def events(text: str) -> list[dict]:
    return [json.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")]


@pytest.fixture
def raw(launch_http):
    """Factory: raw(*server_args, capabilities=...) -> a Raw session on a new server."""
    opened: list[Raw] = []

    def open_raw(*args: str, capabilities: dict | None = None) -> Raw:
        server = launch_http(*args)
        session = Raw(server.url, capabilities)
        opened.append(session)
        return session

    yield open_raw
    for session in opened:
        session.close()


def test_answers_are_json_and_a_call_asking_for_progress_streams(raw):
    session = raw("--tools", wasm("fixture_tool"))
    call = session.post(rpc(1, "tools/call", {"name": "echo", "arguments": {"text": "plain"}}))
    assert call.status_code == 200 and call.headers["content-type"] == "application/json", describe(call)
    assert call.json()["id"] == 1 and call.json()["result"]["content"][0]["text"] == "plain", describe(call)
    # `resultType` came with 2026-07-28; a session speaks an older revision.
    assert "resultType" not in call.json()["result"], describe(call)

    sleep = {"name": "sleep", "arguments": {"ms": 1600}, "_meta": {"progressToken": "p1"}}
    streamed = session.post(rpc(2, "tools/call", sleep))
    assert streamed.status_code == 200, describe(streamed)
    assert streamed.headers["content-type"] == "text/event-stream", describe(streamed)
    messages = events(streamed.text)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p1" for m in progress), messages
    assert messages[-1]["id"] == 2 and messages[-1]["result"]["content"][0]["text"] == "slept", messages
    assert "resultType" not in messages[-1]["result"], messages

    pong = session.post(rpc(3, "ping"))
    assert pong.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}, describe(pong)
    unknown = session.post(rpc(4, "no/such"))
    assert unknown.json()["error"]["code"] == -32601, describe(unknown)


def test_a_client_that_can_be_asked_gets_a_stream_only_for_calls_that_may_ask(raw, tmp_path):
    # The client declares elicitation; echo needs no approval and asks nothing.
    session = raw("--config", approval_config(tmp_path), "--ask-wait", "1s", capabilities={"elicitation": {}})
    # Listed once loaded: until then any call may ask (its policy is unknown).
    listed = session.post(rpc(9, "tools/list"))
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"calculate", "echo"}, describe(listed)
    plain = session.post(rpc(1, "tools/call", {"name": "echo", "arguments": {"text": "plain"}}))
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json", describe(plain)
    assert plain.json()["result"]["content"][0]["text"] == "plain", describe(plain)

    # calculate needs approval: the question and then the answer come on an
    # event stream (unanswered here, so the call is denied after 1 s).
    asked = session.post(rpc(2, "tools/call", {"name": "calculate", "arguments": {"expression": "1+1"}}))
    assert asked.status_code == 200, describe(asked)
    assert asked.headers["content-type"] == "text/event-stream", describe(asked)
    messages = events(asked.text)
    assert [m.get("method") for m in messages if "method" in m][0] == "elicitation/create", messages
    assert messages[-1]["id"] == 2 and messages[-1]["result"]["isError"] is True, messages


def test_sessions_end_with_delete_and_unknown_ones_are_404(raw):
    session = raw("--tools", wasm("calculator"))
    forged = session.post(rpc(1, "tools/list"), **{"Mcp-Session-Id": "0" * 32})
    assert forged.status_code == 404, describe(forged)
    assert session.post(rpc(2, "tools/list")).status_code == 200
    ended = session.http.delete(session.url, headers=session.headers)
    assert ended.status_code == 200, describe(ended)
    after = session.post(rpc(3, "tools/list"))
    assert after.status_code == 404, describe(after)
    again = session.http.delete(session.url, headers=session.headers)
    assert again.status_code == 404, describe(again)


def test_idle_sessions_expire_but_listening_ones_stay(raw):
    idle = raw("--tools", wasm("calculator"), "--session-idle", "1s")
    listening = Raw(idle.url)
    stream_open = threading.Event()

    def listen() -> None:
        # A client of its own: the stream ends with the server.
        try:
            with httpx2.Client(timeout=30) as http, http.stream("GET", listening.url, headers=listening.headers) as stream:
                if stream.status_code == 200:
                    stream_open.set()
                for _ in stream.iter_bytes():
                    pass
        except httpx2.HTTPError:
            pass

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert stream_open.wait(10), "the GET stream did not open"
    time.sleep(2.5)
    expired = idle.post(rpc(1, "tools/list"))
    assert expired.status_code == 404, describe(expired)
    kept = listening.post(rpc(1, "tools/list"))
    assert kept.status_code == 200, describe(kept)
    listening.close()


def test_one_get_stream_per_session(raw):
    session = raw("--tools", wasm("calculator"))
    with session.http.stream("GET", session.url, headers=session.headers) as first:
        assert first.status_code == 200 and first.headers["content-type"] == "text/event-stream"
        second = session.http.get(session.url, headers=session.headers)
        assert second.status_code == 409, describe(second)
    not_sse = session.http.get(session.url, headers=session.headers | {"Accept": "application/json"})
    assert not_sse.status_code == 406, describe(not_sse)


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"Accept": "application/json"}, None, 406),
        ({"Content-Type": "text/plain"}, None, 415),
        ({"MCP-Protocol-Version": "1999-01-01"}, None, 400),
        ({"Mcp-Method": "tools/call"}, None, 400),
        ({}, b"{not json", 400),
        ({}, b"[]", 400),
        ({}, b"{}", 400),
    ],
)
def test_malformed_requests_are_refused(raw, headers, body, status):
    session = raw("--tools", wasm("calculator"))
    content = body if body is not None else json.dumps(rpc(1, "tools/list")).encode()
    response = session.http.post(session.url, content=content, headers=session.headers | headers)
    assert response.status_code == status, describe(response)
    if body is not None:
        assert response.json()["error"]["code"] in (-32700, -32600), describe(response)
    # The session is still usable.
    assert session.post(rpc(2, "tools/list")).status_code == 200


def test_a_request_without_a_session_is_served_the_2026_revision(launch_http):
    server = launch_http("--tools", wasm("calculator"))
    headers = HEADERS | {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "calculate"}
    call = {"_meta": META_2026, "name": "calculate", "arguments": {"expression": "1+2"}}
    with httpx2.Client(timeout=30) as http:
        response = http.post(server.url, json=rpc(1, "tools/call", call), headers=headers)
        assert response.status_code == 200, describe(response)
        assert "mcp-session-id" not in response.headers, describe(response)
        body = response.json() if response.headers["content-type"].startswith("application/json") else events(response.text)[-1]
        assert body["result"]["isError"] is False and "3" in json.dumps(body["result"]["content"]), body
        assert body["result"]["resultType"] == "complete", body
        legacy = http.post(server.url, json=rpc(2, "tools/list"), headers=HEADERS)
        assert 400 <= legacy.status_code < 500, describe(legacy)


def test_typescript_sdk_over_http_keeps_argument_order_and_hears_list_changed(launch_http, tmp_path):
    """The JavaScript table tool on a fresh cache with --load-wait 0s: the
    first listing is empty, list_changed comes on the GET stream, and the
    SDK re-lists and calls; the table's columns keep the rows' key order."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is needed for the TypeScript SDK")
    if not (TS_CLIENT.parent / "node_modules/@modelcontextprotocol/sdk").is_dir():
        pytest.fail("the TypeScript SDK is missing: run `make mcp-ts` (npm ci in tests/mcp/ts)")
    cache = tmp_path / "cold-cache"
    cache.mkdir()
    table = REPO_ROOT / "target/polyglot/mdtable.wasm"
    server = launch_http("--tools", table, "--load-wait", "0s", env={"WASM_AGENT_CACHE_DIR": str(cache)})
    rows = [{"tool": "calculate", "ms": 0.03}, {"tool": "text_stats", "ms": 1.2}]
    call = {"name": "markdown_table", "arguments": {"rows": rows}}
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    finished = subprocess.run(
        ["node", str(TS_CLIENT), json.dumps(call), "--", server.url], env=env, capture_output=True, text=True, timeout=150
    )
    assert finished.returncode == 0, finished.stderr + server.output()
    report = json.loads(finished.stdout.splitlines()[-1])
    assert "markdown_table" not in report["tools"], report
    # The SDK re-listed on list_changed and saw both of the table tool's tools.
    assert report["refreshed"] and report["refreshed"][-1] >= 2, report
    assert report["result"]["isError"] is False, report["result"]
    header = report["result"]["content"][0]["text"].splitlines()[0].replace(" ", "")
    assert header == "|tool|ms|", report["result"]
