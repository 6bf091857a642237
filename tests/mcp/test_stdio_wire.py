"""`serve --stdio` on the wire: raw JSON-RPC lines, no SDK in between.

The stdio loop is wasm-agent's own (over rmcp's types); these pin what an SDK
would hide: errors for malformed and over-long lines that leave the
connection usable, unknown methods, and the 2026-07-28 revision (no
handshake), which the loop hands to rmcp's service.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import BIN, SCRUBBED_ENV, wasm

META_2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


class RawServer:
    """`wasm-agent serve --stdio` spoken to line by line."""

    def __init__(self, env: dict[str, str], *args: str | Path) -> None:
        full_env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV} | env
        self.process = subprocess.Popen(
            [str(BIN), "serve", "--stdio", *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=full_env,
        )

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def request(self, id_: int, method: str, params: dict | None = None) -> dict:
        message = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.read()

    def read(self, timeout: float = 30.0) -> dict:
        """The next message from the server (failing after `timeout`)."""
        result: list[bytes] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            pytest.fail("the server sent nothing")
        return json.loads(result[0])

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(10)


@pytest.fixture
def raw_server(server_env):
    servers: list[RawServer] = []

    def start(*args: str | Path) -> RawServer:
        server = RawServer(server_env, *args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(5)


def initialize(server: RawServer) -> dict:
    reply = server.request(
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    )
    server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    return reply


def test_malformed_and_unknown_requests_get_errors_and_the_connection_goes_on(raw_server):
    server = raw_server("--tools", wasm("calculator"))
    server.send(b"{ this is not json")
    error = server.read()
    assert error["error"]["code"] == -32700 and error["id"] is None, error
    assert initialize(server)["result"]["protocolVersion"] == "2025-11-25"
    unknown = server.request(2, "prompts/summon")
    assert unknown["error"]["code"] == -32601 and unknown["id"] == 2, unknown
    assert "prompts/summon" in unknown["error"]["message"]
    bad = server.request(3, "tools/call", {"name": 7})
    assert bad["error"]["code"] == -32602 and bad["id"] == 3, bad
    call = server.request(4, "tools/call", {"name": "calculate", "arguments": {"expression": "2+3"}})
    assert call["id"] == 4 and call["result"]["isError"] is False, call
    assert "5" in json.dumps(call["result"]["content"]), call
    assert server.close() == 0


def test_an_over_long_line_is_refused_and_the_next_is_served(raw_server):
    server = raw_server("--tools", wasm("calculator"))
    initialize(server)
    server.send(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"' + b"x" * (17 << 20) + b'"}}')
    error = server.read()
    assert error["error"]["code"] == -32700 and "longer than" in error["error"]["message"], error
    assert server.request(10, "ping") == {"jsonrpc": "2.0", "id": 10, "result": {}}


def test_an_unknown_protocol_version_gets_the_newest_with_a_handshake(raw_server):
    server = raw_server("--tools", wasm("calculator"))
    reply = server.request(
        1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    )
    assert reply["result"]["protocolVersion"] == "2025-11-25", reply
    assert reply["result"]["capabilities"]["tools"]["listChanged"] is True, reply


def test_a_client_without_handshake_is_served_the_2026_revision(raw_server):
    """A first request with inline metadata (2026-07-28) goes to rmcp's service."""
    server = raw_server("--tools", wasm("calculator"))
    listing = server.request(1, "tools/list", {"_meta": META_2026})
    names = {tool["name"] for tool in listing["result"]["tools"]}
    assert names == {"calculate"}, listing
    call = server.request(
        2, "tools/call", {"_meta": META_2026, "name": "calculate", "arguments": {"expression": "1+2"}}
    )
    assert call["result"]["isError"] is False and "3" in json.dumps(call["result"]["content"]), call
    assert call["result"]["resultType"] == "complete", call
    assert server.close() == 0


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_client_with_a_handshake_gets_results_in_its_revision_s_shape(raw_server, version):
    """`resultType` came with 2026-07-28: a client that negotiated an older
    revision gets results without it, as rmcp's service would answer it."""
    server = raw_server("--tools", wasm("calculator"))
    reply = server.request(
        1, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    )
    assert reply["result"]["protocolVersion"] == version, reply
    server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    listing = server.request(2, "tools/list")
    call = server.request(3, "tools/call", {"name": "calculate", "arguments": {"expression": "2+3"}})
    failed = server.request(4, "tools/call", {"name": "calculate", "arguments": {}})
    assert call["result"]["isError"] is False and failed["result"]["isError"] is True, (call, failed)
    for message in (reply, listing, call, failed):
        assert "resultType" not in message["result"], message
    assert server.close() == 0


def test_a_request_id_in_flight_cannot_be_reused(raw_server):
    """A second request with the id of a call still running is refused at
    once; the first call still gets its own answer."""
    server = raw_server("--tools", wasm("fixture_tool"))
    server.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
    sleep = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "sleep", "arguments": {"ms": 800}}}
    echo = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "again"}}}
    server.send(json.dumps(sleep).encode())
    server.send(json.dumps(echo).encode())
    refused = server.read()
    assert refused["id"] == 9 and refused["error"]["code"] == -32600, refused
    assert "in flight already" in refused["error"]["message"], refused
    answered = server.read()
    assert answered["id"] == 9 and answered["result"]["content"][0]["text"] == "slept", answered
    assert server.close() == 0
