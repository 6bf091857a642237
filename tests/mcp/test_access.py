"""`[access]` rules: two tenants and four principals (three from a tokens
file, one from an OAuth issuer on loopback), two replicas behind HAProxy on
one PostgreSQL. Each caller lists only the tools the rules let it call, a
hidden tool is refused in the words of a name that does not exist, a tool
calling a tool and a code-mode script act for their caller, and `wasm-agent
access explain` says what the servers then do: one table drives both."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp import MCPError

from conftest import BIN, REPO_ROOT, ListChanged, dump, http_session, names_of, text_of, wasm
from servers import HAProxy, tokens_file
from test_input_required import ready

pytestmark = pytest.mark.anyio

PYTHON = REPO_ROOT / "target/polyglot/run_python.wasm"
AUDIENCE = "https://tools.example.com/mcp"
TOKENS = {"alice-token": ("alice", "acme"), "bob-token": ("bob", "acme"), "carol-token": ("carol", "globex")}
# dave comes with an OAuth token: tenant acme (its `org` claim), in group support.

RULES = """
[access]
default = "deny"

[[access.rules]]
name = "bob formats nothing"
principals = ["bob"]
tools = ["json_format"]
effect = "deny"

[[access.rules]]
name = "acme"
tenants = ["acme"]
tools = ["calculate", "json_*", "run_monty"]
effect = "allow"

[[access.rules]]
name = "globex"
tenants = ["globex"]
tools = ["current_weather", "calculate"]
effect = "allow"

[[access.rules]]
name = "support"
sources = ["oauth"]
scopes = ["tools"]
claims = { groups = "support" }
tools = ["run_python"]
effect = "allow"
"""

# Who sees what: the table both `access explain` and the servers are held to.
EVERY_TOOL = {"calculate", "current_weather", "json_format", "json_query", "json_summarize", "run_python", "run_monty"}
SEES = {
    "alice": {"calculate", "json_format", "json_query", "json_summarize", "run_monty"},
    "bob": {"calculate", "json_query", "json_summarize", "run_monty"},
    "carol": {"calculate", "current_weather"},
    "dave": {"calculate", "json_format", "json_query", "json_summarize", "run_monty", "run_python"},
}


def config(tmp_path: Path) -> Path:
    path = tmp_path / "wasm-agent.toml"
    path.write_text(
        f"""
[tools.calculator]
component = "{wasm("calculator")}"
[tools.json]
component = "{wasm("json")}"
[tools.weather]
component = "{wasm("weather")}"
[tools.run_python]
component = "{PYTHON}"
call_tools = ["*"]
[tools.run_monty]
component = "{wasm("run_monty")}"
call_tools = ["*"]
"""
        + RULES
    )
    return path


class Issuer:
    """An OAuth issuer on loopback: its metadata and an ES256 key set over
    HTTP, and tokens signed with that key."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        jwk |= {"kid": "k1", "alg": "ES256", "use": "sig"}
        documents: dict[str, dict] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                body = documents.get(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps(body or {}).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        documents["/.well-known/oauth-authorization-server"] = {"issuer": self.url, "jwks_uri": f"{self.url}/keys"}
        documents["/keys"] = {"keys": [jwk]}
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, **claims: object) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "iat": now, "exp": now + 600} | claims
        return jwt.encode(body, self.key, algorithm="ES256", headers={"kid": "k1"})

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def issuer():
    issuer = Issuer()
    yield issuer
    issuer.close()


def serve_args(tmp_path: Path, issuer: Issuer, *extra: str) -> tuple:
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    return (
        "--config", config(tmp_path), "--tokens", tokens,
        "--auth-issuer", issuer.url, "--auth-audience", AUDIENCE, "--auth-tenant-claim", "org",
        *extra,
    )  # fmt: skip


def bearer(who: str, issuer: Issuer) -> str:
    if who == "dave":
        return issuer.token(sub="dave", org="acme", scope="openid tools", groups=["staff", "support"])
    return f"{who}-token"


def explain(tmp_path: Path, who: str, *args: str) -> subprocess.CompletedProcess:
    identity = ["--principal", who, "--tenant", TOKENS.get(f"{who}-token", ("", ""))[1]]
    if who == "dave":
        claims = tmp_path / "dave.json"
        claims.write_text(json.dumps({"sub": "dave", "scope": "openid tools", "groups": ["staff", "support"]}))
        identity = ["--claims", str(claims), "--tenant", "acme"]
    return subprocess.run(
        [BIN, "access", "explain", "--config", config(tmp_path), *identity, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_each_caller_sees_and_calls_only_its_tools_on_either_replica(tmp_path, launch_http, postgres, issuer):
    args = serve_args(tmp_path, issuer, "--store", postgres.url)
    replicas = [ready(launch_http(*args)), ready(launch_http(*args))]
    balancer = HAProxy([replica.authority for replica in replicas])
    try:
        for who, sees in SEES.items():
            # What `access explain` says, the servers do.
            explained = explain(tmp_path, who, "--json")
            assert explained.returncode == 0, explained.stderr
            allowed = {tool["tool"] for tool in json.loads(explained.stdout)["tools"] if tool["allowed"]}
            assert allowed == sees, (who, explained.stdout)
            headers = {"Authorization": f"Bearer {bearer(who, issuer)}"}
            async with http_session(balancer.url, headers=headers) as session:
                # Round-robin: consecutive listings come from both replicas.
                for _ in range(2):
                    listed = {tool.name for tool in (await session.list_tools()).tools}
                    assert listed == sees, (who, listed)
                with pytest.raises(MCPError) as missing:
                    await session.call_tool("no_such_tool", {"expression": "1"})
                for hidden in sorted(EVERY_TOOL - sees):
                    with pytest.raises(MCPError) as refused:
                        await session.call_tool(hidden, {"expression": "1"})
                    # Refused as a name that does not exist, listing only its own tools.
                    message = refused.value.message
                    assert refused.value.code == missing.value.code, message
                    assert message.startswith(f'there is no tool named "{hidden}"; '), message
                    assert message.endswith(f"available tools: {', '.join(sorted(sees))}"), message
                    for other in EVERY_TOOL - sees - {hidden}:
                        assert other not in message, message
                if "calculate" in sees:
                    result = await session.call_tool("calculate", {"expression": "6 * 7"})
                    assert text_of(result) == "42", dump(result)
    finally:
        balancer.close()


PYTHON_CALLS = (
    "for name, arguments in [('json_query', {'document': '{\"a\": 1}', 'path': 'a'}), ('current_weather', {'city': 'Oslo'})]:\n"
    "    try:\n"
    "        print(name, tools[name](**arguments))\n"
    "    except ToolCallError as error:\n"
    "        print(name, error.error_kind)\n"
)


async def test_a_tool_calling_a_tool_acts_for_its_caller(tmp_path, launch_http, issuer):
    server = launch_http(*serve_args(tmp_path, issuer))
    headers = {"Authorization": f"Bearer {bearer('dave', issuer)}"}
    async with http_session(server.url, headers=headers) as session:
        listed = await session.call_tool("run_python", {"code": "print(sorted(tools))"})
        expected = sorted(SEES["dave"] - {"run_python"})
        assert text_of(listed) == f"stdout:\n{expected}", dump(listed)
        result = await session.call_tool("run_python", {"code": PYTHON_CALLS})
        assert text_of(result) == "stdout:\njson_query 1\ncurrent_weather unknown_tool", dump(result)


async def test_a_code_mode_script_reaches_only_its_callers_tools(tmp_path, launch_http, issuer):
    audit = tmp_path / "audit.jsonl"
    server = launch_http(*serve_args(tmp_path, issuer, "--code-mode=monty", "--audit", str(audit)))
    async with http_session(server.url, headers={"Authorization": "Bearer bob-token"}) as session:
        listing = (await session.list_tools()).tools
        assert [tool.name for tool in listing] == ["run_code"], listing
        description = listing[0].description
        assert "await calculate(" in description and "await json_query(" in description, description
        assert "json_format" not in description and "current_weather" not in description, description
        allowed = await session.call_tool("run_code", {"code": "print(await calculate(expression='6 * 7'))"})
        assert text_of(allowed) == "stdout:\n42", dump(allowed)
        for script in ("await json_format(document='{}')", "await call_tool('json_format', {'document': '{}'})"):
            hidden = await session.call_tool("run_code", {"code": script})
            assert hidden.is_error is True, dump(hidden)
            assert "json_format" in text_of(hidden), dump(hidden)
            assert "json_summarize" in text_of(hidden) or "unknown_tool" in text_of(hidden), dump(hidden)
    # Carol may not call the interpreter: code mode has nothing for her.
    async with http_session(server.url, headers={"Authorization": "Bearer carol-token"}) as session:
        assert (await session.list_tools()).tools == []
    records = [record for line in audit.read_text().splitlines() if "tool" in (record := json.loads(line))]
    decided = {(r["principal"], r["tool"], r.get("decided_by")) for r in records}
    assert ("bob", "calculate", 'access: allow by rule 2 "acme"') in decided, records
    assert ("bob", "run_monty", 'access: allow by rule 2 "acme"') in decided, records


def test_explain_names_the_deciding_rule_and_exits_1_for_a_hidden_tool(tmp_path):
    shown = explain(tmp_path, "bob")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == 'identity: principal "bob", tenant "acme", source tokens', shown.stdout
    assert any(line.split() == ["json_format", "hidden", "deny", "by", "rule", "1", '"bob', 'formats', 'nothing"'] for line in lines), shown.stdout
    one = explain(tmp_path, "bob", "json_format")
    assert one.returncode == 1, one.stdout
    assert explain(tmp_path, "bob", "calculate").returncode == 0
    missing = explain(tmp_path, "bob", "nope")
    assert missing.returncode != 0 and 'no tool named "nope"' in missing.stderr, missing.stderr


async def test_a_tool_list_change_reaches_only_the_callers_whose_view_changed(tmp_path, launch_http, copy_component):
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    copy_component("calculator", tools_dir)
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[access]\ndefault = "deny"\n'
        '[[access.rules]]\ntools = ["calculate"]\neffect = "allow"\n'
        '[[access.rules]]\ntenants = ["globex"]\ntools = ["echo"]\neffect = "allow"\n'
    )
    tokens = tokens_file(tmp_path / "tokens.toml", TOKENS)
    server = ready(launch_http("--config", rules, "--tokens", tokens, "--tools", tools_dir, "--watch"))
    alice, carol = ListChanged(), ListChanged()
    async with (
        http_session(server.url, headers={"Authorization": "Bearer alice-token"}, message_handler=alice.handler) as theirs,
        http_session(server.url, headers={"Authorization": "Bearer carol-token"}, message_handler=carol.handler) as hers,
    ):
        assert names_of(await theirs.list_tools()) == {"calculate"}
        assert names_of(await hers.list_tools()) == {"calculate"}
        copy_component("echo_tool", tools_dir)
        names = await carol.wait_for_tools(hers, 0, lambda n: "echo" in n, "echo_tool.wasm added")
        assert names == {"calculate", "echo"}, names
        await anyio.sleep(1.0)
        # Alice's view did not change: she hears of nothing, and sees nothing new.
        assert alice.count == 0, alice.count
        assert names_of(await theirs.list_tools()) == {"calculate"}
        (tools_dir / "calculator.wasm").unlink()
        await alice.wait_for_tools(theirs, 0, lambda n: not n, "calculator.wasm removed")


def test_a_session_follows_the_grants_of_the_token_each_request_brings(tmp_path, launch_http, issuer):
    from test_replicas import HEADERS, answer, open_session, rpc

    server = ready(launch_http(*serve_args(tmp_path, issuer)))
    support = issuer.token(sub="dave", org="acme", scope="openid tools", groups=["support"])
    revoked = issuer.token(sub="dave", org="acme", scope="openid tools", groups=["staff"])
    with httpx2.Client(timeout=15) as http:
        session = open_session(http, server.url, support)

        def listed(token: str) -> set[str]:
            headers = HEADERS | {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session,
                                 "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
            listing = answer(http.post(server.url, json=rpc(5, "tools/list", {}), headers=headers))
            return {tool["name"] for tool in listing["result"]["tools"]}

        assert "run_python" in listed(support)
        # The group was taken away: the same session no longer lists what it granted.
        assert "run_python" not in listed(revoked)
        assert "run_python" in listed(support)


def test_a_hidden_tool_is_answered_in_the_form_of_a_missing_one(tmp_path, launch_http, issuer):
    from test_replicas import HEADERS, rpc

    server = ready(launch_http(*serve_args(tmp_path, issuer)))
    auth = {"Authorization": "Bearer carol-token"}
    with httpx2.Client(timeout=15) as http:
        # A client that can be asked: a call that may ask answers as a stream.
        init = rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                                     "clientInfo": {"name": "raw", "version": "0"}})  # fmt: skip
        opened = http.post(server.url, json=init, headers=HEADERS | auth)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=HEADERS | auth | session)  # fmt: skip

        def form(tool: str) -> str:
            answer = http.post(server.url, json=rpc(7, "tools/call", {"name": tool, "arguments": {"code": "1"}}),
                               headers=HEADERS | auth | session)  # fmt: skip
            return answer.headers["content-type"].split(";")[0]

        # run_python may call tools (so may ask), and is hidden from carol.
        assert form("run_python") == form("no_such_tool") == "application/json"
