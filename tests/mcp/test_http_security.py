"""Streamable HTTP only: Host/Origin validation and the bearer token, on the raw wire."""

from __future__ import annotations

import httpx2
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from conftest import http_session, text_of, wasm

TOKEN = "s3cret-token-4711"

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw-httpx2", "version": "0"},
    },
}
BASE_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post_initialize(url: str, **headers: str) -> httpx2.Response:
    """One raw initialize POST; `headers` override the defaults (Host included)."""
    with httpx2.Client(timeout=10) as client:
        response = client.post(url, json=INITIALIZE, headers=BASE_HEADERS | headers)
        response.read()
        return response


def describe(response: httpx2.Response) -> str:
    return f"HTTP {response.status_code} {dict(response.headers)} {response.text[:300]!r}"


@pytest.fixture
def server(launch_http):
    return launch_http("--tools", wasm("calculator"), "--allow-origin", "http://good.example")


def test_plain_request_is_accepted(server):
    """Control for the tests below: the raw request itself is valid."""
    response = post_initialize(server.url)
    assert response.status_code == 200, describe(response)


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "localhost:1234", "[::1]:{port}"])
def test_loopback_host_is_accepted(server, host):
    response = post_initialize(server.url, Host=host.format(port=server.port))
    assert response.status_code == 200, f"Host: {host}: {describe(response)}"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "10.0.0.1:{port}"])
def test_forged_host_is_refused(server, host):
    response = post_initialize(server.url, Host=host.format(port=server.port))
    assert 400 <= response.status_code < 500, f"Host: {host}: {describe(response)}"


def test_forged_origin_is_refused(server):
    response = post_initialize(server.url, Origin="http://evil.example")
    assert response.status_code == 403, describe(response)


def test_allowed_origin_is_accepted(server):
    response = post_initialize(server.url, Origin="http://good.example")
    assert response.status_code == 200, describe(response)


def test_origin_refused_on_get_stream(server):
    with httpx2.Client(timeout=10) as client:
        response = client.get(server.url, headers={"Accept": "text/event-stream", "Origin": "http://evil.example"})
    assert response.status_code == 403, describe(response)


@pytest.fixture(params=["flag", "env"])
def token_server(request, launch_http):
    if request.param == "flag":
        return launch_http("--tools", wasm("calculator"), "--token", TOKEN)
    return launch_http("--tools", wasm("calculator"), env={"WASM_AGENT_MCP_TOKEN": TOKEN})


def test_missing_token_is_401(token_server):
    response = post_initialize(token_server.url)
    assert response.status_code == 401, describe(response)


@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}x", "Bearer x", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN[:-1]}"])
def test_wrong_token_is_401(token_server, authorization):
    response = post_initialize(token_server.url, Authorization=authorization)
    assert response.status_code == 401, f"Authorization: {authorization!r}: {describe(response)}"


def test_right_token_raw(token_server):
    response = post_initialize(token_server.url, Authorization=f"Bearer {TOKEN}")
    assert response.status_code == 200, describe(response)


def test_get_stream_needs_token(token_server):
    with httpx2.Client(timeout=10) as client:
        response = client.get(token_server.url, headers={"Accept": "text/event-stream"})
    assert response.status_code == 401, describe(response)


@pytest.mark.anyio
async def test_right_token_with_the_sdk(token_server):
    async with http_session(token_server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        assert session.initialize_result is not None
        assert session.initialize_result.server_info.name == "wasm-agent"
        result = await session.call_tool("calculate", {"expression": "2 * (3 + 4)"})
        assert result.is_error is False and text_of(result) == "14"


def test_startup_prints_exactly_the_url_line(launch_http):
    """`--http 127.0.0.1:0` prints one line, the URL of the port it bound, and nothing else."""
    server = launch_http("--tools", wasm("calculator"))
    assert server.url.startswith("http://127.0.0.1:") and server.port > 0, server.url
    response = post_initialize(server.url)
    assert response.status_code == 200, describe(response)
    assert server.stderr_lines() == [f"wasm-agent: serving MCP on {server.url}\n"], server.output()
