"""Two `wasm-agent serve --http` replicas on one PostgreSQL (and one Redis
for cached results), behind HAProxy round-robin with no stickiness: any
replica serves any request of any session (both protocol generations),
principals never see each other's state, a replica killed mid-stream loses
no acknowledged write, a database restart loses nothing, and a Redis that
dies leaves calls uncached."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx2
import pytest

from conftest import http_session, text_of, wasm
from servers import HAProxy, Redis, tokens_file

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOKENS = {"alice-token": ("alice", "acme"), "bob-token": ("bob", "acme"), "carol-token": ("carol", "globex")}
META_2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return tokens_file(tmp_path / "tokens.toml", TOKENS)


@pytest.fixture
def replicas(launch_http, postgres, tokens):
    args = ("--tools", wasm("fixture_tool"), "--store", postgres.url, "--tokens", tokens)
    return [launch_http(*args), launch_http(*args)]


def rpc(id_: int, method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def answer(response: httpx2.Response) -> dict:
    assert response.status_code == 200, f"{response.status_code}: {response.text}"
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return response.json()


def result_text(message: dict) -> str:
    assert "result" in message, message
    return message["result"]["content"][0]["text"]


def open_session(http: httpx2.Client, url: str, token: str) -> str:
    init = rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
    opened = http.post(url, json=init, headers=HEADERS | {"Authorization": f"Bearer {token}"})
    session = opened.headers["mcp-session-id"]
    notified = http.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=HEADERS | {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session},
    )
    assert notified.status_code in (200, 202), notified.text
    return session


def call(http: httpx2.Client, url: str, token: str, session: str | None, tool: str, arguments: dict, *, name: str | None = None, id_: int = 1) -> httpx2.Response:
    headers = HEADERS | {"Authorization": f"Bearer {token}"}
    params: dict = {"name": tool, "arguments": arguments}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    else:
        params["_meta"] = META_2026 | ({"io.wasm-agent/session": name} if name else {})
        headers |= {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
    return http.post(url, json=rpc(id_, "tools/call", params), headers=headers)


def test_any_replica_serves_any_session_of_either_protocol_and_only_to_its_owner(replicas):
    first, second = (replica.url for replica in replicas)
    with httpx2.Client(timeout=30) as http:
        # Session protocol: opened and written on one replica, read on the other.
        session = open_session(http, first, "alice-token")
        written = call(http, first, "alice-token", session, "state_set", {"key": "k", "value": "from first"})
        assert result_text(answer(written)) == "ok"
        read = call(http, second, "alice-token", session, "state_get", {"key": "k"})
        assert result_text(answer(read)) == '"from first"'
        # Another principal with the same session id finds no session anywhere.
        for url in (first, second):
            assert call(http, url, "bob-token", session, "state_get", {"key": "k"}).status_code == 404
        # Ended on the second replica: gone for replicas that never held it.
        ended = http.delete(second, headers=HEADERS | {"Authorization": "Bearer alice-token", "Mcp-Session-Id": session})
        assert ended.status_code == 200, ended.text

        # Sessionless protocol: the session the client names.
        written = call(http, second, "alice-token", None, "state_set", {"key": "n", "value": 5}, name="notes")
        assert result_text(answer(written)) == "ok"
        read = call(http, first, "alice-token", None, "state_get", {"key": "n"}, name="notes")
        assert result_text(answer(read)) == "5"
        theirs = call(http, first, "bob-token", None, "state_get", {"key": "n"}, name="notes")
        assert result_text(answer(theirs)) == "null"


@pytest.mark.anyio
async def test_the_official_client_works_through_haproxy_round_robin(replicas):
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    try:
        async with http_session(proxy.url, headers={"Authorization": "Bearer alice-token"}) as session:
            for i in range(20):
                written = await session.call_tool("state_set", {"key": "count", "value": i})
                assert text_of(written) == "ok", written
                read = await session.call_tool("state_get", {"key": "count"})
                assert text_of(read) == str(i), read
    finally:
        log = proxy.close()
    # Both replicas served the session's requests (no stickiness).
    posts = [line for line in log.splitlines() if '"POST /mcp' in line]
    assert len(posts) >= 40, log
    for backend in ("replicas/r1", "replicas/r2"):
        assert sum(backend in line for line in posts) >= 10, log


def test_a_replica_killed_mid_stream_loses_no_acknowledged_write(replicas):
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    acknowledged: list[int] = []
    try:
        with httpx2.Client(timeout=10) as http:
            session = open_session(http, proxy.url, "alice-token")
            killed_at = None
            for i in range(120):
                if i == 40:
                    os.kill(replicas[0].process.pid, signal.SIGKILL)
                    killed_at = time.monotonic()
                try:
                    response = call(http, proxy.url, "alice-token", session, "state_set", {"key": f"k{i}", "value": i}, id_=i + 1)
                except httpx2.HTTPError:
                    continue
                if response.status_code == 200 and result_text(answer(response)) == "ok":
                    acknowledged.append(i)
            assert killed_at is not None
            # The balancer drained the dead replica: the last calls all went through.
            assert all(i in acknowledged for i in range(100, 120)), acknowledged
            survivor = replicas[1].url
            for i in acknowledged:
                read = call(http, survivor, "alice-token", session, "state_get", {"key": f"k{i}"}, id_=1000 + i)
                assert result_text(answer(read)) == str(i), f"acknowledged write k{i} is lost"
        assert len(acknowledged) >= 100, acknowledged
    finally:
        proxy.close()


def test_a_database_restart_fails_state_calls_in_time_and_loses_nothing(replicas, postgres):
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    try:
        with httpx2.Client(timeout=15) as http:
            session = open_session(http, proxy.url, "alice-token")
            written = call(http, proxy.url, "alice-token", session, "state_set", {"key": "kept", "value": 1})
            assert result_text(answer(written)) == "ok"

            postgres.stop()
            # While the database is down, each state call ends within its
            # deadline: with store_unavailable from a replica, or a 503 from
            # the balancer once both replicas report not ready.
            outcomes = set()
            for i in range(10):
                started = time.monotonic()
                response = call(http, proxy.url, "alice-token", session, "state_get", {"key": "kept"}, id_=10 + i)
                assert time.monotonic() - started < 12
                if response.status_code == 503:
                    outcomes.add("503")
                else:
                    message = answer(response)
                    assert message["result"]["isError"], message
                    assert "store" in result_text(message), message
                    outcomes.add("store_unavailable")
                time.sleep(0.2)
            assert outcomes, outcomes
            for replica in replicas:
                assert httpx2.get(replica.url.replace("/mcp", "/readyz")).status_code == 503

            postgres.start()
            deadline = time.monotonic() + 30
            while True:
                response = call(http, proxy.url, "alice-token", session, "state_get", {"key": "kept"}, id_=100)
                if response.status_code == 200 and not answer(response)["result"]["isError"]:
                    break
                assert time.monotonic() < deadline, response.text
                time.sleep(0.3)
            # The write acknowledged before the restart is there, on both replicas.
            for replica in replicas:
                read = call(http, replica.url, "alice-token", session, "state_get", {"key": "kept"}, id_=200)
                assert result_text(answer(read)) == "1"
    finally:
        proxy.close()


def test_results_are_cached_in_redis_across_replicas_per_principal(launch_http, postgres, tokens, tmp_path):
    redis = Redis()
    config = tmp_path / "cache.toml"
    config.write_text('[calls.echo]\ncache_ttl = "5m"\n\n[calls.dependency]\ncache_ttl = "5m"\ncache_shared = true\n')
    args = ("--tools", wasm("fixture_tool"), "--store", postgres.url, "--tokens", tokens,
            "--cache", redis.url, "--config", config)
    first, second = launch_http(*args), launch_http(*args)
    try:
        with httpx2.Client(timeout=15) as http:
            def echo(url: str, token: str, text: str = "same") -> tuple[str, bool]:
                message = answer(call(http, url, token, None, "echo", {"text": text}))
                meta = message["result"].get("_meta") or {}
                return result_text(message), meta.get("io.wasm-agent/cached") is True

            assert echo(first.url, "alice-token") == ("same", False)
            # Another replica answers from the shared cache, for the same caller.
            assert echo(second.url, "alice-token") == ("same", True)
            # Another principal of the same tenant never gets alice's result.
            assert echo(first.url, "bob-token") == ("same", False)
            # Another tenant never gets acme's result.
            assert echo(second.url, "carol-token") == ("same", False)

            # A tool whose results the config declares shared: one per tenant.
            def dependency(url: str, token: str) -> bool:
                message = answer(call(http, url, token, None, "dependency", {"name": "x"}, name="d"))
                return (message["result"].get("_meta") or {}).get("io.wasm-agent/cached") is True

            assert [dependency(first.url, "alice-token"), dependency(second.url, "bob-token"),
                    dependency(first.url, "carol-token")] == [False, True, False]
            # Tools without a cache_ttl are never cached.
            for _ in range(2):
                message = answer(call(http, first.url, "alice-token", None, "state_get", {"key": "x"}, name="c"))
                assert "io.wasm-agent/cached" not in (message["result"].get("_meta") or {})

            redis.stop()
            for url in (first.url, second.url, first.url):
                assert echo(url, "alice-token", "after") == ("after", False)
            assert echo(second.url, "alice-token") == ("same", False)
    finally:
        if redis.process.poll() is None:
            redis.stop()


def test_a_cancellation_posted_to_the_other_replica_stops_the_call(replicas):
    """The call runs on the second replica; the client's
    notifications/cancelled reaches the first, which passes it on."""
    first, second = (replica.url for replica in replicas)
    with httpx2.Client(timeout=30) as http:
        session = open_session(http, first, "alice-token")
        headers = HEADERS | {"Authorization": "Bearer alice-token", "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        body = rpc(9, "tools/call", {"name": "sleep", "arguments": {"ms": 20000}, "_meta": {"progressToken": "p9"}})
        started = time.monotonic()
        with http.stream("POST", second, json=body, headers=headers) as stream:
            time.sleep(0.3)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "reason": "changed my mind"}}
            posted = http.post(first, json=cancel, headers=headers)
            assert posted.status_code == 202, posted.text
            events = [line for line in stream.iter_lines() if line.startswith("data: ")]
        elapsed = time.monotonic() - started
    assert elapsed < 8, f"the call ran on for {elapsed:.1f} s"
    # A cancelled request gets no response.
    assert not any('"result"' in event for event in events), events
