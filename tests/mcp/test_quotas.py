"""`[quotas]`: two replicas behind HAProxy on one PostgreSQL and one Redis
hold one tenant's calls per minute between them, the other tenant is not
slowed, a principal's compute budget (fuel per hour) ends its calls, and
with Redis killed each replica holds the limit on its own (never no limit)
until Redis is back."""

from __future__ import annotations

import json
import time

import httpx2
import pytest

from conftest import wasm
from servers import HAProxy, Redis, tokens_file
from test_input_required import ready
from test_replicas import TOKENS as REPLICA_TOKENS
from test_replicas import answer, call

LIMIT = 6
# erin (tenant globex) has a compute budget of 1 fuel per hour.
TOKENS = REPLICA_TOKENS | {"erin-token": ("erin", "globex")}


@pytest.fixture
def redis():
    server = Redis()
    yield server
    if server.process.poll() is None:
        server.stop()


def config(tmp_path, redis_url: str):
    path = tmp_path / "quotas.toml"
    path.write_text(
        f'[quotas]\nstore = "{redis_url}"\n'
        "[quotas.tenant]\ncalls_per_minute = 600\n"
        f"[quotas.tenants.acme]\ncalls_per_minute = {LIMIT}\nin_flight = 4\n"
        "[quotas.principals.erin]\nfuel_per_hour = 1\n"
    )
    return path


def outcome(http: httpx2.Client, url: str, token: str, text: str = "hi") -> str:
    """`ok`, or the call's error (`kind: message`)."""
    message = answer(call(http, url, token, None, "echo", {"text": text}))
    result = message["result"]
    if not result.get("isError"):
        return "ok"
    return result["content"][0]["text"]


def metric(text: str, name: str) -> float:
    """The value of the sample `name` (with its labels) in /metrics text."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {name} in:\n{text}")


def reconnected(http: httpx2.Client, url: str) -> None:
    """Returns once a call at `url` was counted in Redis (no fallback)."""
    metrics = url.removesuffix("/mcp") + "/metrics"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        before = metric(http.get(metrics).text, "wasm_agent_quota_fallbacks_total")
        outcome(http, url, "carol-token")
        if metric(http.get(metrics).text, "wasm_agent_quota_fallbacks_total") == before:
            return
        time.sleep(0.3)
    raise AssertionError(f"{url} still counts quotas on its own 30 s after Redis came back")


def test_a_tenant_over_its_rate_is_refused_on_every_replica_and_redis_outages_fall_back(
    tmp_path, launch_http, postgres, redis
):
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    audits = [tmp_path / f"audit-{n}.jsonl" for n in (1, 2)]
    replicas = [
        ready(launch_http("--tools", wasm("fixture_tool"), "--store", postgres.url, "--tokens", tokens,
                          "--config", config(tmp_path, redis.url), "--audit", audit))
        for audit in audits
    ]  # fmt: skip
    proxy = HAProxy([f"127.0.0.1:{replica.port}" for replica in replicas])
    try:
        with httpx2.Client(timeout=15) as http:
            # Round-robin: the tenant's calls land on both replicas, one bucket.
            assert [outcome(http, proxy.url, "alice-token") for _ in range(LIMIT)] == ["ok"] * LIMIT
            for replica in replicas:
                refused = outcome(http, replica.url, "bob-token")
                assert refused.startswith(
                    'rate_limited: tenant "acme" is over its quota of 6 calls per minute (burst 6'
                ), refused
                assert "retry after" in refused, refused
            # The other tenant is not slowed.
            assert [outcome(http, proxy.url, "carol-token") for _ in range(3 * LIMIT)] == ["ok"] * 3 * LIMIT
            # Which quota decided is in the audit record.
            records = [json.loads(line) for audit in audits for line in audit.read_text().splitlines()]
            decided = {r.get("decided_by") for r in records if r.get("outcome") == "rate_limited"}
            assert 'quota: tenant "acme" calls_per_minute' in decided, decided

            # Every check so far was Redis's own (a bucket and places in flight side by side).
            for replica in replicas:
                scraped = http.get(replica.url.removesuffix("/mcp") + "/metrics").text
                assert metric(scraped, "wasm_agent_quota_fallbacks_total") == 0, scraped

            # Redis gone: each replica counts on its own, and still refuses.
            redis.stop()
            first = replicas[0].url
            seen = [outcome(http, first, "alice-token") for _ in range(LIMIT + 1)]
            assert seen[:LIMIT] == ["ok"] * LIMIT, seen
            assert seen[LIMIT].startswith("rate_limited: "), seen
            assert any("quotas are counted per replica" in line for line in replicas[0].stderr_lines())

            # Redis back (empty): shared again, once each replica has
            # reconnected (its first command after the restart fails, and
            # it counts on its own for the second after).
            redis.start()
            for replica in replicas:
                reconnected(http, replica.url)
            shared = [outcome(http, proxy.url, "alice-token") for _ in range(LIMIT + 1)]
            assert shared[LIMIT].startswith("rate_limited: "), shared
            assert shared.count("ok") == LIMIT, shared

            # Per tenant in /metrics: calls, refusals by reason, fuel; and the fallbacks.
            metrics = http.get(replicas[0].url.removesuffix("/mcp") + "/metrics").text
            assert 'wasm_agent_tenant_calls_total{tenant="globex",outcome="ok"}' in metrics, metrics
            refusals = metric(metrics, 'wasm_agent_tenant_refusals_total{tenant="acme",reason="calls_per_minute"}')
            assert refusals >= 2, metrics
            assert metric(metrics, 'wasm_agent_tenant_fuel_total{tenant="acme"}') > 0, metrics
            assert metric(metrics, "wasm_agent_quota_fallbacks_total") > 0, metrics
    finally:
        proxy.close()


def test_a_principal_past_its_compute_budget_is_refused_until_the_next_hour(tmp_path, launch_http, redis):
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    server = ready(launch_http("--tools", wasm("fixture_tool"), "--tokens", tokens,
                               "--config", config(tmp_path, redis.url)))  # fmt: skip
    with httpx2.Client(timeout=15) as http:
        # Its first call burns fuel (more than the 1 its hour allows) ...
        assert outcome(http, server.url, "erin-token") == "ok"
        # ... so the next is refused, naming the budget and when it renews.
        refused = outcome(http, server.url, "erin-token")
        assert refused.startswith(
            'rate_limited: principal "erin" has burned its compute budget of 1 fuel this hour'
        ), refused
        assert "retry after" in refused, refused
        # Another principal of the same tenant has no such budget.
        assert outcome(http, server.url, "carol-token") == "ok"
