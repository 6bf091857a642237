"""Asking the person on any replica. Over the sessionless revision
(2026-07-28), with multi round-trip requests: a call that needs approval is
answered with an input-required result, and the retry, on either of two
replicas behind HAProxy round-robin on one PostgreSQL, runs it or refuses
it; the `requestState` cannot be forged, replayed, moved to another caller
or other arguments, or used after it expired. Over the session revisions,
with elicitation: the client's answer, POSTed to the replica that did not
ask, reaches the call that asked (Python and TypeScript SDKs)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, SCRUBBED_ENV, approval_config, dump, http_session, text_of, wasm
from servers import HAProxy, Postgres, tokens_file
from test_elicitation import CALC, TS_CLIENT, Person, audited_calls, page  # noqa: F401 (a fixture)

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOKENS = {"alice-token": ("alice", "acme"), "bob-token": ("bob", "acme")}
WASM_CALCULATOR = wasm("calculator")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


@pytest.fixture
def shared(tmp_path: Path) -> dict[str, Path]:
    """The files every replica shares: tokens, request-state keys, config."""
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[[keys]]\nid = "one"\nsecret = "{os.urandom(32).hex()}"\n')
    return {"tokens": tokens, "keys": keys, "config": approval_config(tmp_path)}


def serve_args(shared: dict[str, Path], postgres: Postgres, audit: Path, *extra: str) -> tuple:
    return (
        "--config", shared["config"], "--store", postgres.url, "--tokens", shared["tokens"],
        "--request-state-keys", shared["keys"], "--audit", audit, *extra,
    )


def ready(server):
    """`server`, once its /readyz says it is ready (its tools compiled)."""
    deadline = time.monotonic() + 60
    url = server.url.removesuffix("/mcp") + "/readyz"
    while httpx2.get(url, timeout=5).status_code != 200:
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)
    return server


@pytest.fixture
def replicas(launch_http, postgres, shared, tmp_path):
    return [
        ready(launch_http(*serve_args(shared, postgres, tmp_path / f"audit-{n}.jsonl")))
        for n in (1, 2)
    ]


def call(url: str, token: str, arguments: dict, *, state: str | None = None, responses: dict | None = None, tool: str = "calculate", meta: dict = META) -> dict:
    params: dict = {"name": tool, "arguments": arguments, "_meta": meta}
    if state is not None:
        params["requestState"] = state
    if responses is not None:
        params["inputResponses"] = responses
    headers = HEADERS | {
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = httpx2.post(url, json=body, headers=headers, timeout=30)
    assert response.status_code == 200, f"{response.status_code}: {response.text}"
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return response.json()


def allow(question: str, decision: str = "allow_once") -> dict:
    return {question: {"action": "accept", "content": {"decision": decision}}}


def asked(message: dict) -> tuple[str, str, dict]:
    """The input-required result's state, its one question's key and form."""
    result = message["result"]
    assert result["resultType"] == "input_required", message
    ((key, request),) = result["inputRequests"].items()
    assert request["method"] == "elicitation/create", request
    return result["requestState"], key, request["params"]


@asynccontextmanager
async def sessionless(url: str, person: Person, token: str = "alice-token"):
    """The official client, speaking 2026-07-28 to `url` as `token`'s owner,
    with `person` answering its questions."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="2026-07-28", elicitation_callback=person) as client:
            yield client


def refused(message: dict, says: str) -> None:
    assert "error" in message, message
    assert "requestState refused" in message["error"]["message"], message
    assert says in message["error"]["message"], message


@pytest.mark.anyio
async def test_the_official_client_is_asked_and_the_retry_runs_on_the_other_replica(replicas, tmp_path):
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    person = Person("allow_once")
    try:
        async with sessionless(proxy.url, person) as client:
            for _ in range(3):
                result = await client.call_tool("calculate", CALC)
                assert result.is_error is False, dump(result)
                # The calculator keeps `ans`: its session's handle follows.
                assert result.content[0].text == "14", dump(result)
            person.decision = "deny"
            denied = await client.call_tool("calculate", CALC)
            assert denied.is_error is True, dump(denied)
            assert "did not approve" in text_of(denied), dump(denied)
            person.decision = None  # declines
            declined = await client.call_tool("calculate", CALC)
            assert declined.is_error is True, dump(declined)
    finally:
        log = proxy.close()
    # The same question as over elicitation, without the session choice.
    assert len(person.asked) == 5, person.asked
    message = person.asked[0].message
    assert message.startswith('Allow the tool "calculate" (component sha256:'), message
    assert '{"expression":"2 * (3 + 4)"}' in message, message
    assert person.choices() == ["allow_once", "deny"]
    # Round-robin: each question and its retry reached different replicas.
    posts = [line for line in log.splitlines() if '"POST /mcp' in line]
    backends = ["replicas/r1" if "replicas/r1" in line else "replicas/r2" for line in posts]
    assert len(backends) >= 10, log
    assert all(a != b for a, b in zip(backends, backends[1:])), log
    # Who decided is on record, wherever the retry ran.
    records = audited_calls(tmp_path / "audit-1.jsonl", 0) + audited_calls(tmp_path / "audit-2.jsonl", 0)
    decided = [r for r in records if (r.get("approval") or {}).get("decision") in ("approved", "denied")]
    assert len(decided) == 5, records
    assert {r["approval"]["by"] for r in decided} == {"the MCP client's user (input required)"}, decided
    answers = sorted(r["approval"]["answer"] for r in decided)
    assert answers == ["allowed_once"] * 3 + ["denied"] * 2, decided
    pending = [r for r in records if (r.get("approval") or {}).get("decision") == "pending"]
    assert len(pending) == 5, records


def test_the_retry_is_answered_by_the_survivor_of_a_replica_killed_in_between(replicas):
    first, second = replicas
    state, key, _ = asked(call(first.url, "alice-token", CALC))
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait(10)
    done = call(second.url, "alice-token", CALC, state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "14", done
    assert done["result"].get("isError") is not True, done


def test_no_answer_denies_and_states_cannot_be_forged_replayed_or_moved(replicas):
    first, second = (replica.url for replica in replicas)
    # No answer: the retry without one refuses the call.
    state, key, _ = asked(call(first, "alice-token", CALC))
    unanswered = call(second, "alice-token", CALC, state=state, responses={})
    assert unanswered["result"]["isError"] is True, unanswered
    assert "did not answer" in unanswered["result"]["content"][0]["text"], unanswered

    state, key, _ = asked(call(first, "alice-token", CALC))
    # Another principal, other arguments, another tool: refused, and the
    # state stays good for its own request.
    refused(call(second, "bob-token", CALC, state=state, responses=allow(key)), "another caller")
    other = {"expression": "1 + 1"}
    refused(call(second, "alice-token", other, state=state, responses=allow(key)), "other arguments")
    # Forged: the payload changed (to bob), or made up.
    tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
    refused(call(second, "alice-token", CALC, state=tampered, responses=allow(key)), "did not issue it")
    for made_up in ("rs2.bm9uZQ.e30.AAAA", "hello", ""):
        refused(call(second, "alice-token", CALC, state=made_up, responses=allow(key)), "")
    # Used once: the retry runs; the same state again is refused, anywhere.
    done = call(second, "alice-token", CALC, state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "14", done
    for url in (first, second):
        refused(call(url, "alice-token", CALC, state=state, responses=allow(key)), "used already")


def test_a_state_expires_after_the_ask_wait_and_other_keys_do_not_open_it(launch_http, postgres, shared, tmp_path):
    server = launch_http(*serve_args(shared, postgres, tmp_path / "audit.jsonl", "--ask-wait", "1s"))
    state, key, _ = asked(call(server.url, "alice-token", CALC))
    time.sleep(1.5)
    refused(call(server.url, "alice-token", CALC, state=state, responses=allow(key)), "expired")
    # A replica with other keys cannot open what this one sealed.
    other_keys = tmp_path / "other.toml"
    other_keys.write_text(f'[[keys]]\nid = "two"\nsecret = "{os.urandom(32).hex()}"\n')
    other = launch_http(
        "--config", shared["config"], "--store", postgres.url, "--tokens", shared["tokens"],
        "--request-state-keys", other_keys,
    )
    state, key, _ = asked(call(server.url, "alice-token", CALC))
    refused(call(other.url, "alice-token", CALC, state=state, responses=allow(key)), "key this server does not have")
    # Rotation: a replica with the new key first and the old one still
    # opens it.
    rotated = tmp_path / "rotated.toml"
    rotated.write_text(other_keys.read_text() + shared["keys"].read_text())
    third = launch_http(
        "--config", shared["config"], "--store", postgres.url, "--tokens", shared["tokens"],
        "--request-state-keys", rotated,
    )
    done = call(third.url, "alice-token", CALC, state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "14", done


def test_a_client_that_cannot_show_forms_is_not_asked(replicas):
    message = call(replicas[0].url, "alice-token", CALC, meta=META | {"io.modelcontextprotocol/clientCapabilities": {}})
    assert message["result"]["isError"] is True, message
    assert "nobody could be asked" in message["result"]["content"][0]["text"], message


def session_headers(session: str | None = None) -> dict:
    headers = HEADERS | {"Authorization": "Bearer alice-token", "MCP-Protocol-Version": "2025-11-25"}
    return headers | ({"Mcp-Session-Id": session} if session else {})


def test_an_elicitation_answer_posted_to_the_other_replica_reaches_the_call(replicas):
    first, second = (replica.url for replica in replicas)
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    with httpx2.Client(timeout=30) as http:
        opened = http.post(first, json=init, headers=session_headers())
        session = opened.headers["mcp-session-id"]
        http.post(second, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session_headers(session))
        for decision, runs in (("allow_once", True), ("deny", False)):
            # The call on the second replica (which took the session up),
            # the answer to the first.
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "calculate", "arguments": CALC}}
            with http.stream("POST", second, json=body, headers=session_headers(session)) as stream:
                lines = stream.iter_lines()
                question = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
                assert question["method"] == "elicitation/create", question
                assert "calculate" in question["params"]["message"], question
                reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"decision": decision}}}
                posted = http.post(first, json=reply, headers=session_headers(session))
                assert posted.status_code == 202, posted.text
                result = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
            assert result["id"] == 7, result
            text = result["result"]["content"][0]["text"]
            assert (text == "14") is runs, result
            # The answer is taken once: the same reply again reaches nothing.
            again = http.post(second, json=reply, headers=session_headers(session))
            assert again.status_code == 202, again.text


@pytest.mark.anyio
async def test_the_sdks_answer_through_round_robin_and_every_call_runs(replicas, server_env, tmp_path):
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    person = Person("allow_once")
    try:
        headers = {"Authorization": "Bearer alice-token"}
        async with http_session(proxy.url, headers=headers, elicitation_callback=person) as session:
            for _ in range(4):
                result = await session.call_tool("calculate", CALC)
                assert text_of(result) == "14", dump(result)
        # The TypeScript SDK's client, through the same balancer.
        if shutil.which("node") is None:
            pytest.skip("Node.js is needed for the TypeScript SDK")
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV} | server_env | {
            "ELICIT": "allow_once", "MCP_BEARER": "alice-token",
        }
        call = {"name": "calculate", "arguments": CALC}
        finished = subprocess.run(
            ["node", str(TS_CLIENT), json.dumps(call), "--", proxy.url], env=env, capture_output=True, text=True, timeout=120
        )
        assert finished.returncode == 0, finished.stderr
        report = json.loads(finished.stdout.splitlines()[-1])
        assert len(report["elicited"]) == 1, report
        assert report["result"]["content"][0]["text"] == "14", report
    finally:
        log = proxy.close()
    assert len(person.asked) == 4, person.asked
    posts = [line for line in log.splitlines() if '"POST /mcp' in line]
    for backend in ("replicas/r1", "replicas/r2"):
        assert sum(backend in line for line in posts) >= 4, log


@pytest.mark.parametrize(
    "text, says",
    [
        ('[[keys]]\nid = "a"\nsecret = "abcd"\n', 'request-state key "a" has 2 bytes; at least 32 are needed'),
        ('[[keys]]\nid = "a"\nsecret = "not hex"\n', 'key 1 ("a"): secret must be hex digits'),
        ("keys = []\n", "no request-state key"),
    ],
)
def test_a_bad_keys_file_stops_the_server_naming_it(tmp_path, text, says):
    keys = tmp_path / "keys.toml"
    keys.write_text(text)
    finished = subprocess.run(
        [BIN, "serve", "--stdio", "--tools", WASM_CALCULATOR, "--request-state-keys", keys],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert finished.returncode == 2, finished.stderr
    assert f"error: {keys}: {says}" in finished.stderr, finished.stderr
    assert "panicked" not in finished.stderr


def held_args(shared: dict[str, Path], postgres: Postgres, page: str, *extra: str) -> tuple:
    return (
        "--tools", wasm("fetch"), "--ask", page, "--store", postgres.url, "--tokens", shared["tokens"],
        "--request-state-keys", shared["keys"], *extra,
    )


@pytest.mark.anyio
async def test_a_running_calls_question_is_answered_through_the_other_replica(launch_http, postgres, shared, page, tmp_path):
    """fetch asks for its destination while it runs: the call is held where
    it paused, and the retry (on the other replica, round-robin) continues
    it there."""
    audit = [tmp_path / "held-1.jsonl", tmp_path / "held-2.jsonl"]
    replicas = [ready(launch_http(*held_args(shared, postgres, page, "--audit", log))) for log in audit]
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    person = Person("allow_once")
    try:
        async with sessionless(proxy.url, person) as client:
            allowed = await client.call_tool("fetch", {"url": f"{page}/notes.txt"})
            person.decision = "deny"
            denied = await client.call_tool("fetch", {"url": f"{page}/notes.txt"})
    finally:
        log = proxy.close()
    assert allowed.is_error is False, dump(allowed)
    assert "hello from loopback" in text_of(allowed), dump(allowed)
    assert denied.is_error is True, dump(denied)
    assert denied.structured_content["error"]["kind"] == "capability_denied", dump(denied)
    assert [f"connect to {page}" in asked.message for asked in person.asked] == [True, True], person.asked
    posts = [line for line in log.splitlines() if '"POST /mcp' in line]
    backends = ["r1" if "replicas/r1" in line else "r2" for line in posts]
    assert all(a != b for a, b in zip(backends, backends[1:])), log
    # One record per call, on the replica that ran it, with the answer.
    records = audited_calls(audit[0], 0) + audited_calls(audit[1], 0)
    answers = sorted(record["asked"][0]["answer"] for record in records if record.get("asked"))
    assert answers == ["allowed_once", "denied"], records


def test_a_held_call_on_a_killed_replica_is_refused_not_repeated(launch_http, postgres, shared, page):
    first, second = (ready(launch_http(*held_args(shared, postgres, page))) for _ in range(2))
    arguments = {"url": f"{page}/notes.txt"}
    # Here, then there: the retry reaches the holder through the store.
    state, key, form = asked(call(first.url, "alice-token", arguments, tool="fetch"))
    assert f"connect to {page}" in form["message"], form
    done = call(second.url, "alice-token", arguments, tool="fetch", state=state, responses=allow(key))
    assert "hello from loopback" in done["result"]["content"][0]["text"], done
    # The holder killed before the answer: refused, saying so.
    state, key, _ = asked(call(first.url, "alice-token", arguments, tool="fetch"))
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait(10)
    gone = call(second.url, "alice-token", arguments, tool="fetch", state=state, responses=allow(key))
    refused(gone, "the question expired")
    assert "call the tool again" in gone["error"]["message"], gone


def test_a_held_call_is_cancelled_when_its_question_expires_and_holds_are_bounded(launch_http, postgres, shared, page, tmp_path):
    audit = tmp_path / "audit.jsonl"
    server = ready(launch_http(*held_args(shared, postgres, page, "--ask-wait", "1s", "--audit", audit)))
    arguments = {"url": f"{page}/notes.txt"}
    state, key, _ = asked(call(server.url, "alice-token", arguments, tool="fetch"))
    time.sleep(2)
    refused(call(server.url, "alice-token", arguments, tool="fetch", state=state, responses=allow(key)), "expired")
    # The call did not go on without its answer: it was cancelled.
    [record] = audited_calls(audit, 1)
    assert record["outcome"] == "cancelled", record

    # One caller holds at most 8 calls on a replica; past that, the question
    # is not asked and the call goes on without it.
    longer = ready(launch_http(*held_args(shared, postgres, page)))
    for _ in range(8):
        asked(call(longer.url, "alice-token", arguments, tool="fetch"))
    over = call(longer.url, "alice-token", arguments, tool="fetch")
    assert over["result"]["isError"] is True, over
    assert over["result"]["structuredContent"]["error"]["kind"] == "capability_denied", over
    # Another caller is not held back by it.
    state, key, _ = asked(call(longer.url, "bob-token", arguments, tool="fetch"))
    done = call(longer.url, "bob-token", arguments, tool="fetch", state=state, responses=allow(key))
    assert "hello from loopback" in done["result"]["content"][0]["text"], done


def test_an_answer_for_the_session_is_known_to_every_replica(launch_http, postgres, shared, tmp_path):
    """With --ask-session: "allow for this session", given on one replica,
    covers the same call of that session on the other, over both
    revisions; another session is asked again."""
    first, second = (
        ready(launch_http(*serve_args(shared, postgres, tmp_path / f"audit-{n}.jsonl", "--ask-session")))
        for n in (1, 2)
    )
    # Sessionless: the session is the one the first call starts, whose
    # handle its result hands over.
    state, key, form = asked(call(first.url, "alice-token", CALC))
    choices = [option["const"] for option in form["requestedSchema"]["properties"]["decision"]["oneOf"]]
    assert choices == ["allow_once", "allow_session", "deny"], form
    done = call(second.url, "alice-token", CALC, state=state, responses=allow(key))
    handle = done["result"]["_meta"]["io.wasm-agent/session"]
    in_session = CALC | {"_session": handle}
    state, key, form = asked(call(first.url, "alice-token", in_session))
    choices = [option["const"] for option in form["requestedSchema"]["properties"]["decision"]["oneOf"]]
    assert choices == ["allow_once", "allow_session", "deny"], form
    done = call(second.url, "alice-token", in_session, state=state, responses=allow(key, "allow_session"))
    assert done["result"]["content"][0]["text"] == "14", done
    for url in (first.url, second.url):
        again = call(url, "alice-token", in_session)
        assert again["result"].get("resultType") != "input_required", again
        assert again["result"]["content"][0]["text"] == "14", again
    # Another session (no handle) is asked again.
    asked(call(second.url, "alice-token", CALC))

    # Session revision: allowed for the session on the second replica,
    # remembered on the first.
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    with httpx2.Client(timeout=30) as http:
        session = http.post(first.url, json=init, headers=session_headers()).headers["mcp-session-id"]
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "calculate", "arguments": CALC}}
        with http.stream("POST", second.url, json=body, headers=session_headers(session)) as stream:
            lines = stream.iter_lines()
            question = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
            reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"decision": "allow_session"}}}
            assert http.post(second.url, json=reply, headers=session_headers(session)).status_code == 202
            result = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
        assert result["result"]["content"][0]["text"] == "14", result
        body["id"] = 4
        again = http.post(first.url, json=body, headers=session_headers(session))
        message = answer_of(again)
        assert message["result"]["content"][0]["text"] == "14", message


def answer_of(response: httpx2.Response) -> dict:
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert all('"elicitation/create"' not in line for line in data), data
        return json.loads(data[-1])
    return response.json()
