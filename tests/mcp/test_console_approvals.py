"""Questions answered by operators in the console, on any replica.

`[calls.calculate] answered_by = "operators"`: a call that needs approval
waits for an operator, not for the person behind the call. Two replicas share
a PostgreSQL store and request-state keys. The official Python SDK client
calls through replica A and is sent to the question's page with URL-mode
elicitation (2025-11-25). An operator in headless Chromium opens the page on
replica B and answers. The call goes on in the client, and B's audit log
names the operator.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from conftest import BIN, http_session, text_of, wasm
from console_browser import browser, log_in, operators_file, shot, wait_for  # noqa: F401
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from servers import HAProxy, tokens_file

pytestmark = pytest.mark.anyio

CLIENT_TOKEN = "alice-client-token"
OPERATOR_TOKEN = "olga-operator-token"
# An operator who is also a caller (the same principal name).
ALICE_OPERATOR_TOKEN = "alice-operator-token"


def config(tmp_path: Path) -> Path:
    path = tmp_path / "wasm-agent.toml"
    path.write_text(
        f"""
[tools.calc]
component = "{wasm('calculator')}"

[calls.calculate]
requires_approval = "always"
answered_by = "operators"
"""
    )
    return path


@pytest.fixture
def two_replicas(launch_http, postgres, tmp_path: Path):
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[[keys]]\nid = "k1"\nsecret = "{secrets.token_hex(32)}"\n')
    clients = tokens_file(tmp_path / "clients.toml", {CLIENT_TOKEN: ("alice", "acme")})
    operators = operators_file(
        tmp_path / "operators.toml", {OPERATOR_TOKEN: "olga", ALICE_OPERATOR_TOKEN: "alice"}
    )
    common = (
        "--config", config(tmp_path), "--store", postgres.url, "--tokens", clients,
        "--console-tokens", operators, "--request-state-keys", keys, "--ask-session",
        "--ask-wait", "60s",
    )
    replicas = []
    for name in ("a", "b"):
        audit = tmp_path / f"audit-{name}.jsonl"
        server = launch_http(*common, "--audit", audit)
        server.audit = audit  # type: ignore[attr-defined]
        replicas.append(server)
    return replicas


class Person:
    """The client's user: told where the question is decided (URL mode)."""

    def __init__(self) -> None:
        self.sent_to: list[types.ElicitRequestParams] = []
        self.told = anyio.Event()

    async def __call__(self, context, params):
        self.sent_to.append(params)
        self.told.set()
        return types.ElicitResult(action="accept")


async def sent_to_page_by(calls, call, expression: str, person: Person) -> types.ElicitRequestParams:
    """Starts `call(expression)` in `calls`; the URL-mode request that then
    sends `person` to the question's page."""
    calls.start_soon(call, expression)
    with anyio.fail_after(20):
        await person.told.wait()
    params = person.sent_to[-1]
    assert params.mode == "url", params
    return params


async def test_an_operator_answers_on_another_replica_and_the_call_goes_on(two_replicas, browser):
    from selenium.webdriver.common.by import By

    a, b = two_replicas
    driver = browser
    console_b = f"http://{b.authority}/console"
    person = Person()
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}

    async with http_session(a.url, headers=headers, elicitation_callback=person) as session:
        results: list[types.CallToolResult] = []

        async def call(expression: str) -> None:
            results.append(await session.call_tool("calculate", {"expression": expression}))

        async with anyio.create_task_group() as calls:
            # The person is sent to the question's page, by URL, not asked.
            params = await sent_to_page_by(calls, call, "6 * 7", person)
            assert f"/console/approvals/" in params.url and params.elicitation_id in params.url
            assert "An operator decides this" in params.message and "calculate" in params.message
            question_id = params.url.rsplit("/", 1)[1]

            # The operator logs in on the other replica, which lists the question.
            await anyio.to_thread.run_sync(lambda: log_in(driver, console_b, OPERATOR_TOKEN))
            driver.get(f"{console_b}/approvals")
            listed = driver.find_element(By.ID, "waiting").text
            assert "calculate" in listed and "principal alice, tenant acme" in listed, listed
            driver.find_element(By.CSS_SELECTOR, f'a[href="/console/approvals/{question_id}"]').click()
            question = driver.find_element(By.ID, "question").text
            assert 'Allow the tool "calculate"' in question and "6 * 7" in question, question
            shot(driver, "approval")
            assert results == [], "the call waits for the operator"
            driver.find_element(By.ID, "allow-once").click()
            await anyio.to_thread.run_sync(
                lambda: wait_for(driver, lambda d: d.find_elements(By.ID, "none"), what="no question left")
            )
        assert text_of(results[0]) == "42" and not results[0].is_error

        # A second call: the operator denies it, on replica B again.
        person.told = anyio.Event()
        async with anyio.create_task_group() as calls:
            calls.start_soon(call, "1 + 1")
            with anyio.fail_after(20):
                await person.told.wait()
            page = person.sent_to[-1].url.replace(a.authority, b.authority)
            driver.get(page)
            driver.find_element(By.ID, "deny").click()
        assert results[1].is_error and "an operator did not approve" in text_of(results[1])
        # An answered question is gone; answering again changes nothing.
        driver.get(page)
        assert driver.find_elements(By.ID, "gone")

    # B's trail names the operator and what they answered; A's call records say who decided.
    b_records = [json.loads(line) for line in b.audit.read_text().splitlines()]
    actions = [(r["action"], r.get("tool")) for r in b_records if r["event"] == "operator"]
    assert actions == [("log_in", None), ("allow_once", "calculate"), ("deny", "calculate")], actions
    allowed = next(r for r in b_records if r.get("action") == "allow_once")
    assert allowed["operator"] == "olga" and allowed["caller"] == "principal alice, tenant acme"
    assert allowed["question"] == question_id and allowed["detail"].startswith("sha256:")
    a_calls = [json.loads(line) for line in a.audit.read_text().splitlines()]
    approvals = [r["approval"] for r in a_calls if r.get("event") == "call" and r["tool"] == "calculate"]
    assert [x["by"] for x in approvals] == ["an operator (console)"] * 2, approvals
    assert [x["decision"] for x in approvals] == ["approved", "denied"], approvals
    verified = subprocess.run([str(BIN), "audit", "verify", str(b.audit)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr


async def test_a_question_for_operators_cannot_be_answered_by_the_client_or_a_forged_form(two_replicas):
    a, b = two_replicas
    person = Person()
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    async with http_session(a.url, headers=headers, elicitation_callback=person) as session:
        async with anyio.create_task_group() as calls:
            result: list[types.CallToolResult] = []

            async def call() -> None:
                result.append(await session.call_tool("calculate", {"expression": "2 + 2"}))

            calls.start_soon(call)
            with anyio.fail_after(20):
                await person.told.wait()
            page = person.sent_to[0].url
            own = {"Origin": f"http://{a.authority}"}
            with httpx2.Client(follow_redirects=False, timeout=10) as http:
                # Nobody answers a question about their own call.
                log_in_over_http(http, a.authority, ALICE_OPERATOR_TOKEN, own)
                csrf = http.get(page).text.split('name="csrf" value="')[1].split('"')[0]
                response = http.post(page, data={"answer": "allow_once", "csrf": csrf}, headers=own)
                assert response.status_code == 403 and "a call you made" in response.text
                http.cookies.clear()
                # The client's own token opens nothing, and cannot answer.
                response = http.post(page, data={"answer": "allow_once"}, headers={**headers, **own})
                assert response.status_code == 401
                # An operator's form without the login's CSRF token changes nothing.
                log_in_over_http(http, a.authority, OPERATOR_TOKEN, own)
                response = http.post(page, data={"answer": "allow_once"}, headers=own)
                assert response.status_code == 403 and "CSRF" in response.text
                # "For the session" is answered only where offered; nonsense is refused.
                csrf = http.get(page).text.split('name="csrf" value="')[1].split('"')[0]
                response = http.post(page, data={"answer": "yes", "csrf": csrf}, headers=own)
                assert response.status_code == 400
                response = http.post(page, data={"answer": "deny", "csrf": csrf}, headers=own)
                assert response.status_code == 303
                response = http.post(page, data={"answer": "allow_once", "csrf": csrf}, headers=own)
                assert response.status_code == 409, "the first answer counts"
        assert result[0].is_error and "an operator did not approve" in text_of(result[0])
    # The trail has the answer that counted, and no record of the refused one.
    deadline = time.monotonic() + 10
    while True:
        records = [json.loads(line) for line in a.audit.read_text().splitlines()]
        actions = [r["action"] for r in records if r["event"] == "operator" and r.get("question")]
        if actions or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    records = [json.loads(line) for line in a.audit.read_text().splitlines()]
    actions = [r["action"] for r in records if r["event"] == "operator" and r.get("question")]
    assert actions == ["deny"], actions


def test_operators_answer_only_where_the_console_is(tmp_path: Path):
    result = subprocess.run(
        [str(BIN), "serve", "--http", "127.0.0.1:0", "--config", str(config(tmp_path))],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert '[calls.calculate] answered_by = "operators"' in result.stderr and "--console-tokens" in result.stderr


# The sessionless revision (2026-07-28): a client that declares URL-mode
# elicitation is sent to the question's page with an input-required result,
# and its retry, on either replica, goes on once an operator answers.
SESSIONLESS = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


def sessionless_call(url: str, expression: str, *, state: str | None = None, responses: dict | None = None) -> dict:
    return sessionless_request(url, "calculate", {"expression": expression}, state, responses)


def sessionless_request(url: str, tool: str, arguments: dict, state: str | None, responses: dict | None) -> dict:
    """A 2026-07-28 `tools/call` of `tool` by the client, declaring URL mode; its answer."""
    params: dict = {"name": tool, "arguments": arguments, "_meta": SESSIONLESS}
    if state is not None:
        params["requestState"], params["inputResponses"] = state, responses or {}
    response = httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
        headers={
            "Authorization": f"Bearer {CLIENT_TOKEN}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        },
        timeout=60,
    )
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return response.json()


def log_in_over_http(http: httpx2.Client, authority: str, token: str, headers: dict | None = None) -> None:
    """Logs `http` in to the console at `authority` with `token`, through its login form."""
    form = http.get(f"http://{authority}/console/login")
    response = http.post(
        f"http://{authority}/console/login",
        data={"form": form.cookies["wa_console_form"], "token": token},
        headers=headers or {},
    )
    assert response.status_code == 303, response.text


@contextmanager
def operator_client(authority: str, token: str = OPERATOR_TOKEN):
    """An operator logged in to the console at `authority` over plain HTTP."""
    with httpx2.Client(follow_redirects=False, timeout=10, headers={"Origin": f"http://{authority}"}) as http:
        log_in_over_http(http, authority, token)
        yield http


def answer(http: httpx2.Client, page: str, decision: str) -> None:
    csrf = http.get(page).text.split('name="csrf" value="')[1].split('"')[0]
    response = http.post(page, data={"answer": decision, "csrf": csrf})
    assert response.status_code == 303, response.text


def sent_to_page(message: dict) -> tuple[str, str, dict]:
    """The state of an input-required result that sends the person to a
    question's page, its one request's key, and the request's parameters."""
    result = message["result"]
    assert result["resultType"] == "input_required", message
    ((key, request),) = result["inputRequests"].items()
    assert request["method"] == "elicitation/create", request
    return result["requestState"], key, request["params"]


def test_a_sessionless_client_is_sent_to_the_page_and_its_own_reply_answers_nothing(two_replicas):
    a, b = two_replicas
    # The first request, on A: the person is sent to the question's page.
    state, key, params = sent_to_page(sessionless_call(a.url, "6 * 7"))
    assert params["mode"] == "url", params
    assert params["url"].startswith(f"http://{a.authority}/console/approvals/"), params
    assert params["url"].endswith(params["elicitationId"]), params
    assert "An operator decides this" in params["message"] and "6 * 7" in params["message"]
    page = params["url"].replace(a.authority, b.authority)
    # The retry, on B, claims an approval in its reply: it answers nothing,
    # and the call waits for the operator.
    claimed = {key: {"action": "accept", "content": {"decision": "allow_once"}}}
    with ThreadPoolExecutor(1) as pool:
        retry = pool.submit(sessionless_call, b.url, "6 * 7", state=state, responses=claimed)
        time.sleep(1.5)
        assert not retry.done(), "the client's own reply approved the call"
        with operator_client(b.authority) as operator:
            answer(operator, page, "deny")
        message = retry.result(timeout=30)
    text = message["result"]["content"][0]["text"]
    assert message["result"]["isError"] and "an operator did not approve" in text, message
    # The state was good for that one retry.
    again = sessionless_call(a.url, "6 * 7", state=state, responses=claimed)
    assert "requestState refused" in again["error"]["message"], again

    # Allowed by an operator on A, the call sent to the page on B goes on
    # in the retry on A, and its answer is the tool's.
    state, key, params = sent_to_page(sessionless_call(b.url, "2 + 3"))
    with operator_client(a.authority) as operator:
        answer(operator, params["url"].replace(b.authority, a.authority), "allow_once")
    message = sessionless_call(a.url, "2 + 3", state=state, responses={key: {"action": "accept"}})
    assert message["result"]["content"][0]["text"] == "5", message
    a_calls = [json.loads(line) for line in a.audit.read_text().splitlines()]
    b_calls = [json.loads(line) for line in b.audit.read_text().splitlines()]
    approvals = [
        r["approval"] for r in a_calls + b_calls if r.get("event") == "call" and r.get("tool") == "calculate"
    ]
    # Each call stopped first (its person sent to the page), then was decided.
    assert sorted(x["decision"] for x in approvals) == ["approved", "denied", "pending", "pending"], approvals
    assert {x["by"] for x in approvals} == {"an operator (console)"}, approvals


async def test_the_official_sessionless_client_opens_the_page_and_its_call_goes_on(two_replicas):
    a, b = two_replicas
    for replica in two_replicas:  # HAProxy sends requests only to ready replicas
        deadline = time.monotonic() + 60
        while httpx2.get(f"http://{replica.authority}/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, replica.output()
            time.sleep(0.1)
    proxy = HAProxy([a.authority, b.authority])
    person = Person()
    try:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=60) as http:
            transport = streamable_http_client(proxy.url, http_client=http)
            async with Client(transport, mode="2026-07-28", elicitation_callback=person) as client:
                results: list = []

                async def call(expression: str) -> None:
                    results.append(await client.call_tool("calculate", {"expression": expression}))

                async with anyio.create_task_group() as calls:
                    params = await sent_to_page_by(calls, call, "6 * 7", person)
                    # The person accepted at once; the call still waits for an operator.
                    await anyio.sleep(1)
                    assert results == []
                    page = params.url.replace(a.authority, b.authority)

                    def allow() -> None:
                        with operator_client(b.authority) as operator:
                            answer(operator, page, "allow_once")

                    await anyio.to_thread.run_sync(allow)
                assert not results[0].is_error and text_of(results[0]).startswith("42\n"), results
    finally:
        proxy.close()


def test_a_call_with_two_questions_for_operators_runs_after_both_answers(launch_http, postgres, tmp_path: Path):
    """`search` needs approval and asks for a folder, both answered by
    operators: each retry brings back what was decided, so neither is asked
    twice and the call runs once both are allowed."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("alpha\nbeta\n")
    path = tmp_path / "files.toml"
    path.write_text(
        f'[tools.files]\ncomponent = "{wasm("files")}"\n\n'
        '[calls.search]\nrequires_approval = "always"\nanswered_by = "operators"\n'
    )
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[[keys]]\nid = "k1"\nsecret = "{secrets.token_hex(32)}"\n')
    clients = tokens_file(tmp_path / "clients.toml", {CLIENT_TOKEN: ("alice", "acme")})
    operators = operators_file(tmp_path / "operators.toml", {OPERATOR_TOKEN: "olga"})
    server = launch_http(
        "--config", path, "--store", postgres.url, "--tokens", clients, "--console-tokens", operators,
        "--request-state-keys", keys, "--ask", f"{data}:/data:ro", "--ask-wait", "60s",
    )
    arguments = {"path": "/data", "pattern": "beta"}

    def call(state: str | None = None, responses: dict | None = None) -> dict:
        return sessionless_request(server.url, "search", arguments, state, responses)

    pages = []
    message = call()
    with operator_client(server.authority) as operator:
        for _ in range(2):
            state, key, params = sent_to_page(message)
            pages.append(params["message"])
            answer(operator, params["url"], "allow_once")
            message = call(state, {key: {"action": "accept"}})
    assert "result" in message and message["result"].get("resultType", "complete") == "complete", message
    assert "beta" in json.dumps(message["result"]["content"]), message
    # Two questions, each asked once: the call's own, and the folder's.
    assert len(set(pages)) == 2 and sum("/data" in page for page in pages) >= 1, pages
