"""Scripts that stop for the person and go on anywhere, later. A Monty
script (`run_monty`) whose tool call needs approval stops over the
sessionless revision (2026-07-28): its pause goes into the shared store and
the client gets the question as an input-required result. The answer may
reach another replica, after the first was killed; the script goes on from
the call it stopped at, and no call before it runs twice. The pause and the
state naming it cannot be replayed, altered, expired or taken up by
another caller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from conftest import approval_config, dump, text_of, wasm
from servers import HAProxy, tokens_file
from test_elicitation import Person
from test_input_required import TOKENS, allow, asked, call, ready, refused, serve_args, sessionless

# Reads a document (no approval), then calls calculate (approval needed).
SCRIPT = {
    "code": "import json\n"
    "who = json.loads(await json_query(document='{\"who\": \"ada\"}', path='who'))\n"
    "total = await calculate(expression='6 * 7')\n"
    "f'{who} {total}'"
}


@pytest.fixture
def shared(tmp_path: Path) -> dict[str, Path]:
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[[keys]]\nid = "one"\nsecret = "{os.urandom(32).hex()}"\n')
    extra = f"""
[tools.monty]
component = "{wasm('run_monty')}"
call_tools = ["calculate", "json_query"]

[tools.json]
component = "{wasm('json')}"
"""
    return {"tokens": tokens, "keys": keys, "config": approval_config(tmp_path, extra)}


def records(*paths: Path) -> list[dict]:
    lines = [line for path in paths if path.exists() for line in path.read_text().splitlines() if line.strip()]
    return [record for record in map(json.loads, lines) if record.get("event") == "call"]


def calls_of(tool: str, *paths: Path) -> list[dict]:
    return [record for record in records(*paths) if record["tool"] == tool]


def start_script(url: str, token: str = "alice-token") -> tuple[str, str, dict]:
    return asked(call(url, token, SCRIPT, tool="run_monty"))


@pytest.mark.anyio
async def test_a_paused_script_goes_on_at_the_other_replica_after_the_first_is_killed(launch_http, postgres, shared, tmp_path):
    audits = [tmp_path / f"audit-{n}.jsonl" for n in (1, 2)]
    replicas = [ready(launch_http(*serve_args(shared, postgres, audit))) for audit in audits]
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    killed: list[int] = []

    class KillsTheAsker(Person):
        """Answers once the replica that asked is gone."""

        async def __call__(self, context, params):
            asker = next(n for n, audit in enumerate(audits) if "run_monty" in (audit.read_text() if audit.exists() else ""))
            os.killpg(replicas[asker].process.pid, signal.SIGKILL)
            replicas[asker].process.wait(10)
            killed.append(asker)
            await anyio.sleep(1.5)  # HAProxy marks it down
            return await super().__call__(context, params)

    person = KillsTheAsker("allow_once")
    try:
        async with sessionless(proxy.url, person) as client:
            result = await client.call_tool("run_monty", SCRIPT)
    finally:
        proxy.close()
    assert result.is_error is False, dump(result)
    assert text_of(result) == "value:\n'ada 42'", dump(result)
    # The person was asked about the script's call of calculate.
    assert len(person.asked) == 1 and "calculate" in person.asked[0].message, person.asked
    survivor = audits[1 - killed[0]]
    # The document was read once, before the pause, by the killed replica;
    # the survivor made only the approved call and the rest of the script.
    assert len(calls_of("json_query", *audits)) == 1, records(*audits)
    assert [r["approval"]["answer"] for r in calls_of("calculate", survivor)] == ["allowed_once"], records(survivor)
    assert calls_of("json_query", survivor) == [], records(survivor)


def psql(postgres, sql: str) -> str:
    return subprocess.run(
        [str(postgres.bin / "psql"), "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres", "-Atc", sql],
        check=True, capture_output=True, text=True, cwd="/",
    ).stdout.strip()


def test_a_pause_cannot_be_replayed_moved_or_altered(launch_http, postgres, shared, tmp_path):
    first, second = (
        ready(launch_http(*serve_args(shared, postgres, tmp_path / f"audit-{n}.jsonl"))).url for n in (1, 2)
    )
    state, key, _ = start_script(first)
    assert psql(postgres, "SELECT count(*) FROM wasm_agent_mailboxes WHERE address LIKE 'script-pause/%'") == "1"
    # Another caller, another script: refused, and the state stays good.
    refused(call(second, "bob-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)), "another caller")
    other = {"code": SCRIPT["code"] + "\n1"}
    refused(call(second, "alice-token", other, tool="run_monty", state=state, responses=allow(key)), "other arguments")
    done = call(second, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "value:\n'ada 42'", done
    # Taken once: deleted from the store; the state again is refused.
    assert psql(postgres, "SELECT count(*) FROM wasm_agent_mailboxes WHERE address LIKE 'script-pause/%' AND message IS NOT NULL") == "0"
    for url in (first, second):
        refused(call(url, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)), "used already")
    # A pause altered in the store (its state, or the answers it kept) is
    # refused, not run.
    state, key, _ = start_script(first)
    psql(postgres, "UPDATE wasm_agent_mailboxes SET message = replace(message, 'a', 'b') WHERE address LIKE 'script-pause/%'")
    refused(call(second, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)), "does not belong")
    # A pause gone from the store (expired, or taken): refused, saying so.
    state, key, _ = start_script(first)
    psql(postgres, "DELETE FROM wasm_agent_mailboxes WHERE address LIKE 'script-pause/%'")
    refused(call(second, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)), "is gone")
    # Denied: the script sees the refusal (and may go on without it).
    state, key, _ = start_script(first)
    denied = call(second, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key, "deny"))
    assert denied["result"]["isError"] is True, denied
    assert "did not approve" in denied["result"]["content"][0]["text"], denied


def test_a_pause_expires_with_its_question(launch_http, postgres, shared, tmp_path):
    server = launch_http(*serve_args(shared, postgres, tmp_path / "audit.jsonl", "--ask-wait", "1s"))
    state, key, _ = start_script(ready(server).url)
    time.sleep(1.5)
    refused(call(server.url, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)), "expired")


def test_a_caller_has_at_most_eight_scripts_waiting(launch_http, postgres, shared, tmp_path):
    server = ready(launch_http(*serve_args(shared, postgres, tmp_path / "audit.jsonl")))
    for _ in range(8):
        start_script(server.url)
    ninth = call(server.url, "alice-token", SCRIPT, tool="run_monty")
    assert ninth["result"]["isError"] is True, ninth
    assert "8 scripts of this caller already wait for answers" in ninth["result"]["content"][0]["text"], ninth
    # Another caller is not held back.
    start_script(server.url, "bob-token")


def test_an_answer_allows_one_call_and_the_other_calls_of_the_batch_are_not_made_again(launch_http, postgres, shared, tmp_path):
    audit = tmp_path / "audit.jsonl"
    server = ready(launch_http(*serve_args(shared, postgres, audit))).url
    # The document is read beside the call that needs approval; then the
    # same call again, which the first answer does not cover.
    script = {
        "code": "import asyncio\n"
        "doc, total = await asyncio.gather(json_query(document='[1, 2]', path='[1]'), calculate(expression='6 * 7'))\n"
        "again = await calculate(expression='6 * 7')\n"
        "(doc, total, again)"
    }
    state, key, form = asked(call(server, "alice-token", script, tool="run_monty"))
    state, key, form = asked(call(server, "alice-token", script, tool="run_monty", state=state, responses=allow(key)))
    assert "calculate" in form["message"], form
    done = call(server, "alice-token", script, tool="run_monty", state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "value:\n('2', '42', '42')", done
    assert len(calls_of("json_query", audit)) == 1, records(audit)
    answers = [r["approval"]["answer"] for r in calls_of("calculate", audit) if r["approval"]["decision"] != "pending"]
    assert answers == ["allowed_once", "allowed_once"], records(audit)


def test_a_script_needing_approval_itself_goes_on_without_being_asked_again(launch_http, postgres, shared, tmp_path):
    # The interpreter's own call needs approval too: the person approves
    # the script once; its pause goes on as that approved call.
    config = shared["config"]
    config.write_text(config.read_text() + '\n[calls.run_monty]\nrequires_approval = "always"\n')
    audit = tmp_path / "audit.jsonl"
    server = ready(launch_http(*serve_args(shared, postgres, audit))).url
    state, key, form = start_script(server)
    assert "run_monty" in form["message"], form
    state, key, form = asked(call(server, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key)))
    assert "calculate" in form["message"], form
    done = call(server, "alice-token", SCRIPT, tool="run_monty", state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "value:\n'ada 42'", done
    assert len(calls_of("json_query", audit)) == 1, records(audit)


def test_gathered_identical_calls_are_one_question_and_one_answer_allows_one(launch_http, postgres, shared, tmp_path):
    audit = tmp_path / "audit.jsonl"
    server = ready(launch_http(*serve_args(shared, postgres, audit))).url
    script = {"code": "import asyncio\nawait asyncio.gather(calculate(expression='6 * 7'), calculate(expression='6 * 7'))"}
    message = call(server, "alice-token", script, tool="run_monty")
    assert len(message["result"]["inputRequests"]) == 1, message
    state, key, _ = asked(message)
    # One answer, one call: the other is asked about again.
    state, key, _ = asked(call(server, "alice-token", script, tool="run_monty", state=state, responses=allow(key)))
    done = call(server, "alice-token", script, tool="run_monty", state=state, responses=allow(key))
    assert done["result"]["content"][0]["text"] == "value:\n['42', '42']", done
    ran = [r for r in calls_of("calculate", audit) if r["approval"]["decision"] != "pending"]
    assert [r["approval"]["answer"] for r in ran] == ["allowed_once", "allowed_once"], records(audit)
