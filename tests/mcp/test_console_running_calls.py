"""A running call's question answered by operators, over the sessionless revision.

`fetch` asks for its destination while it runs (`--ask PAGE`), and its
questions go to the operators (`[calls.fetch] answered_by = "operators"`).
A 2026-07-28 client that declares URL mode is sent to the question's page at
once; the call waits for the operator on the replica running it and goes on
when answered there, whether or not the client comes back; the retry, on
either replica, collects what it did.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import wasm
from console_browser import operators_file
from servers import tokens_file
from test_console_approvals import CLIENT_TOKEN, OPERATOR_TOKEN, answer, operator_client, sent_to_page, sessionless_request
from test_elicitation import page  # noqa: F401 (a fixture)


@pytest.fixture
def fetch_replicas(launch_http, postgres, page, tmp_path: Path):  # noqa: F811
    config = tmp_path / "fetch.toml"
    config.write_text(f'[tools.web]\ncomponent = "{wasm("fetch")}"\n\n[calls.fetch]\nanswered_by = "operators"\n')
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[[keys]]\nid = "k1"\nsecret = "{secrets.token_hex(32)}"\n')
    clients = tokens_file(tmp_path / "clients.toml", {CLIENT_TOKEN: ("alice", "acme")})
    operators = operators_file(tmp_path / "operators.toml", {OPERATOR_TOKEN: "olga"})
    replicas = []
    for name in ("a", "b"):
        audit = tmp_path / f"audit-{name}.jsonl"
        server = launch_http(
            "--config", config, "--store", postgres.url, "--tokens", clients, "--console-tokens", operators,
            "--request-state-keys", keys, "--ask", page, "--ask-wait", "60s", "--audit", audit,
        )
        server.audit = audit  # type: ignore[attr-defined]
        replicas.append(server)
    return replicas


def fetch(url: str, arguments: dict, state: str | None = None, responses: dict | None = None) -> dict:
    return sessionless_request(url, "fetch", arguments, state, responses)


def fetch_records(audit: Path) -> list[dict]:
    lines = audit.read_text().splitlines() if audit.exists() else []
    return [r for r in map(json.loads, lines) if r.get("event") == "call" and r.get("tool") == "fetch"]


def test_the_person_is_sent_to_the_page_and_the_call_goes_on_where_it_runs(fetch_replicas, page):  # noqa: F811
    a, b = fetch_replicas
    arguments = {"url": f"{page}/notes.txt"}
    # The first request, on A, ends with the page of the question the
    # running call asked; the call waits on A.
    state, key, params = sent_to_page(fetch(a.url, arguments))
    assert params["mode"] == "url" and f"connect to {page}" in params["message"], params
    assert params["url"].startswith(f"http://{a.authority}/console/approvals/"), params
    # The retry, on B, before anyone decided: it waits, claiming an
    # approval answers nothing, and the operator's allow on B lets the call
    # on A go on; the retry brings back what it did.
    claimed = {key: {"action": "accept", "content": {"decision": "allow_once"}}}
    with ThreadPoolExecutor(1) as pool:
        retry = pool.submit(fetch, b.url, arguments, state, claimed)
        time.sleep(1.5)
        assert not retry.done(), "the client's own reply let the call go on"
        with operator_client(b.authority) as operator:
            answer(operator, params["url"].replace(a.authority, b.authority), "allow_once")
        done = retry.result(timeout=30)
    assert "hello from loopback" in done["result"]["content"][0]["text"], done
    # It ran once, on A, allowed by the operator.
    [record] = fetch_records(a.audit)
    assert record["outcome"] == "ok" and record["asked"][0]["answer"] == "allowed_once", record
    assert fetch_records(b.audit) == []
    # Reading what the call did changes nothing: a retry whose response was
    # lost may be sent again, and the call is not made again.
    again = fetch(a.url, arguments, state, claimed)
    assert again["result"] == done["result"], again
    assert len(fetch_records(a.audit)) == 1 and fetch_records(b.audit) == []


def test_a_decided_call_ends_without_its_retry_and_a_late_retry_collects_it(fetch_replicas, page):  # noqa: F811
    a, b = fetch_replicas
    arguments = {"url": f"{page}/notes.txt"}
    state, key, params = sent_to_page(fetch(a.url, arguments))
    # A retry before the decision waits a while, then is sent to the same
    # page again (no request stays open until the operator comes).
    started = time.monotonic()
    waiting = fetch(b.url, arguments, state, {key: {"action": "accept"}})
    assert 15 < time.monotonic() - started < 40, "the retry waits about 20 s"
    state, key, again = sent_to_page(waiting)
    assert again == params, again
    # Denied on A with nobody waiting: the call ends all the same.
    with operator_client(a.authority) as operator:
        answer(operator, params["url"], "deny")
    deadline = time.monotonic() + 20
    while not fetch_records(a.audit):
        assert time.monotonic() < deadline, "the call did not end without its retry"
        time.sleep(0.1)
    [record] = fetch_records(a.audit)
    assert record["outcome"] == "capability_denied" and record["asked"][0]["answer"] == "denied", record
    # The retry, later, on B, is told truthfully what the call did.
    denied = fetch(b.url, arguments, state, {key: {"action": "accept"}})
    assert denied["result"]["isError"] is True, denied
    assert denied["result"]["structuredContent"]["error"]["kind"] == "capability_denied", denied
    assert "hello" not in json.dumps(denied), denied


def test_a_call_whose_replica_stopped_is_refused_not_repeated(fetch_replicas, page):  # noqa: F811
    a, b = fetch_replicas
    arguments = {"url": f"{page}/notes.txt"}
    state, key, params = sent_to_page(fetch(a.url, arguments))
    os.killpg(a.process.pid, signal.SIGKILL)
    a.process.wait(10)
    gone = fetch(b.url, arguments, state, {key: {"action": "accept"}})
    message = gone["error"]["message"]
    assert "the call stopped before it ended" in message and "may not have finished" in message, gone
    assert "call the tool again" in message, gone
    assert fetch_records(b.audit) == [], "the call was not made again elsewhere"
