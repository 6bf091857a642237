"""`make bench` (MCP part): `wasm-agent serve` as an MCP client sees it, beside
the client's floor, in one run.

The official Python SDK drives each server as a desktop client would, over
stdio and over streamable HTTP. The floor is a bare responder (Node.js) that
answers the same messages with no work at all: what this client costs by
itself. Figures are medians of interleaved rounds; the ratios are what to
compare across machines. A server and its floor are measured side by side in
each round, in turn first, and compared round by round, since this machine's
speed drifts by more than the differences between them.

With calls in flight the SDK client keeps one core busy by itself, so calls/s
is its own pace: the rows beside it give the client's CPU per call and how
busy it was, which show whether a server ever made the client wait.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import bench_plain
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("WASM_AGENT_BIN") or ROOT / "target/release/wasm-agent")
WASM = Path(os.environ.get("WASM_DIR") or ROOT / "target/wasm32-wasip2/release")
POLYGLOT = ROOT / "target/polyglot"
# The example tools the book serves to the MCP Inspector (docs/mcp.md).
EXAMPLE_TOOLS = [WASM / f"{n}.wasm" for n in ("calculator", "files", "json", "fetch", "weather")] + [
    POLYGLOT / "textstats.wasm",
    POLYGLOT / "mdtable.wasm",
]

RESPOND = r"""
const respond = (m) => {
  if (m.method === 'initialize') return { protocolVersion: m.params.protocolVersion,
    capabilities: { tools: {} }, serverInfo: { name: 'bare', version: '0' } };
  if (m.method === 'tools/list') return { tools: [{ name: 'echo',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } } }] };
  if (m.method === 'tools/call') return { content: [{ type: 'text', text: m.params.arguments.text }], isError: false };
  return {};
};
"""
# The floor over stdio: one line in, one line out.
BARE_STDIO = RESPOND + r"""
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id !== undefined) process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: respond(m) }) + '\n');
});
"""
# The floor over streamable HTTP: each POST answered with one JSON body.
BARE_HTTP = RESPOND + r"""
const server = require('http').createServer((req, res) => {
  if (req.method === 'DELETE') { res.writeHead(200); res.end(); return; }
  if (req.method !== 'POST') { res.writeHead(405); res.end(); return; }
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const m = JSON.parse(body);
    if (m.id === undefined) { res.writeHead(202); res.end(); return; }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: respond(m) }));
  });
});
server.listen(0, '127.0.0.1', () => console.error(`serving MCP on http://127.0.0.1:${server.address().port}/mcp`));
"""

SEQUENTIAL = 2000
CONCURRENT = 4000
IN_FLIGHT = 16
ROUNDS = 3
# Rounds of the SDK client's figures: calls/s with calls in flight is this
# client's own pace (it keeps a core busy), so it moves with the machine.
SDK_ROUNDS = 5
# Rounds of the plain client's figures; a server and its floor are compared
# round by round (the median of the differences).
PLAIN_ROUNDS = 5
SLEEPERS = 1000


# ---------------------------------------------------------------- processes


def children() -> list[int]:
    """Pids of this process's children."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid():
                pids.append(int(entry.name))
    return pids


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A server session and its process id."""

    def __init__(self, session: ClientSession, pid: int) -> None:
        self.session, self.pid = session, pid


@asynccontextmanager
async def over_stdio(command: str, args: list[str], env: dict[str, str]) -> AsyncIterator[Server]:
    before = set(children())
    params = StdioServerParameters(command=command, args=args, env=env)
    with open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                (pid,) = set(children()) - before
                yield Server(session, pid)


@asynccontextmanager
async def over_http(argv: list[str], env: dict[str, str]) -> AsyncIterator[Server]:
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in process.stderr:
            if match := re.search(r"serving MCP on (http://\S+/mcp)", line):
                url = match.group(1)
                break
        if url is None:
            raise SystemExit(f"{argv[0]} did not start serving")
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0)) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield Server(session, process.pid)
    finally:
        process.terminate()
        process.wait(10)


# ---------------------------------------------------------------- measurements


async def echo(session: ClientSession, text: str = "hi") -> float:
    started = time.perf_counter()
    result = await session.call_tool("echo", {"text": text})
    elapsed = time.perf_counter() - started
    if result.is_error or result.content[0].text != text:
        raise SystemExit(f"unexpected result: {result}")
    return elapsed


async def sequential(server: Server) -> tuple[float, float]:
    """p50 latency and server CPU per call, one call at a time."""
    cpu = cpu_seconds(server.pid)
    latencies = [await echo(server.session) for _ in range(SEQUENTIAL)]
    return statistics.median(latencies), (cpu_seconds(server.pid) - cpu) / SEQUENTIAL


async def concurrent(server: Server) -> tuple[float, float, float, float]:
    """Calls/s, server CPU per call, this client's CPU per call and the share
    of one core this client kept busy, with IN_FLIGHT calls in flight."""
    cpu = cpu_seconds(server.pid)
    client = time.process_time()
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        limiter = anyio.Semaphore(IN_FLIGHT)

        async def one(i: int) -> None:
            async with limiter:
                await echo(server.session, f"m{i}")

        for i in range(CONCURRENT):
            group.start_soon(one, i)
    elapsed = time.perf_counter() - started
    client = time.process_time() - client
    return CONCURRENT / elapsed, (cpu_seconds(server.pid) - cpu) / CONCURRENT, client / CONCURRENT, client / elapsed


async def while_looping(server: Server, loops: int) -> float:
    """Echo p50 while `loops` endless calls run in other sandboxes."""
    async with anyio.create_task_group() as group:
        for _ in range(loops):
            group.start_soon(server.session.call_tool, "spin", {})
        await anyio.sleep(1.0)
        during = statistics.median([await echo(server.session) for _ in range(200)])
        group.cancel_scope.cancel()
    return during


async def beside_a_spinner(server: Server) -> float:
    """Echo p50 while another process keeps one core busy: what any load
    on one core does to this client and server, with no endless call (two
    cores of one machine share more than their caches)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        await anyio.sleep(1.0)
        return statistics.median([await echo(server.session) for _ in range(200)])
    finally:
        spinner.kill()
        spinner.wait()


async def sleepers(server: Server) -> tuple[float, int]:
    """Peak RSS with SLEEPERS calls sleeping in a host call at once."""
    finished = 0
    async with anyio.create_task_group() as group:

        async def one() -> None:
            nonlocal finished
            result = await server.session.call_tool("sleep", {"ms": 4000})
            finished += not result.is_error

        for _ in range(SLEEPERS):
            group.start_soon(one)
        peak = 0.0
        for _ in range(30):
            await anyio.sleep(0.1)
            peak = max(peak, rss_mib(server.pid))
    return peak, finished


async def median_start(command: str, args: list[str], env: dict[str, str]) -> float:
    """Median time from spawn to an initialized session, of 7 starts."""
    times = []
    for _ in range(7):
        started = time.perf_counter()
        async with over_stdio(command, args, env):
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def spawn_to_listing(argv: list[str], env: dict[str, str], starts: int = 9) -> tuple[float, float, int]:
    """Medians of `starts` spawns of `argv` (a stdio server) to its
    `initialize` answer and to its whole `tools/list` answer, with a plain
    JSON-lines client, and the number of tools listed."""
    first, listed, count = [], [], 0
    for _ in range(starts):
        started = time.perf_counter()
        server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                           b'"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n')
        server.stdin.flush()
        server.stdout.readline()
        first.append(time.perf_counter() - started)
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
                           b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}\n')
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        listed.append(time.perf_counter() - started)
        count = len(answer["result"]["tools"])
        server.kill()
        server.wait()
    return statistics.median(first), statistics.median(listed), count


Rounds = dict[str, list[float]]


def in_turn(pair: list, round_number: int) -> list:
    """A server and its floor, the floor first every other round, so that a
    machine slowing down or speeding up favours neither."""
    return pair if round_number % 2 == 0 else pair[::-1]


async def round_of(name: str, server: Server, figures: Rounds) -> None:
    for _ in range(200):
        await echo(server.session)
    p50, cpu = await sequential(server)
    rate, cpu_concurrent, client, busy = await concurrent(server)
    for key, value in [("p50", p50), ("cpu", cpu), ("rate", rate), ("cpu16", cpu_concurrent), ("client16", client), ("busy16", busy)]:
        figures.setdefault(f"{name} {key}", []).append(value)


# ---------------------------------------------------------------- the run


async def main() -> None:
    cache = tempfile.mkdtemp(prefix="wasm-agent-bench-")
    env = {"WASM_AGENT_CACHE_DIR": cache, "WASM_AGENT_DATA_DIR": cache, "PATH": os.environ["PATH"]}
    # The server is measured serving `tests/echo-tool`: one tool built with
    # the guest SDK, importing 20 host functions, as a small Rust tool does.
    # `tests/fixture-tool` (the hostile tests' tools, which use sockets, HTTP
    # and files: 138 imports) is measured beside it, since wasmtime wires
    # every import on every instantiation; its loops and sleeps are used for
    # the figures under load.
    limits = ["--timeout", "30s", "--max-concurrency", "1000"]
    stdio_args = ["serve", "--stdio", "--tools", str(WASM / "echo_tool.wasm"), *limits]
    http_argv = [str(BIN), "serve", "--http", "127.0.0.1:0", "--tools", str(WASM / "echo_tool.wasm"), *limits]
    fixture_args = ["serve", "--stdio", "--tools", str(WASM / "fixture_tool.wasm"), *limits]
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is needed for the bare responders (the floor)")

    # Compile into the cache first, then time starts with it.
    for args in (stdio_args, fixture_args):
        async with over_stdio(str(BIN), args, env):
            pass
    start = await median_start(str(BIN), stdio_args, env)
    floor_start = await median_start(node, ["-e", BARE_STDIO], env)

    figures: Rounds = {}
    servers = [
        ("stdio", lambda: over_stdio(str(BIN), stdio_args, env)),
        ("stdio floor", lambda: over_stdio(node, ["-e", BARE_STDIO], env)),
        ("http", lambda: over_http(http_argv, env)),
        ("http floor", lambda: over_http([node, "-e", BARE_HTTP], env)),
    ]
    for round_number in range(SDK_ROUNDS):
        for transport in (servers[:2], servers[2:]):
            for name, opened in in_turn(transport, round_number):
                async with opened() as server:
                    await round_of(name, server, figures)
        for t in ("stdio", "http"):
            figures.setdefault(f"{t} rate share", []).append(figures[f"{t} rate"][-1] / figures[f"{t} floor rate"][-1])
            figures.setdefault(f"{t} added p50", []).append(figures[f"{t} p50"][-1] - figures[f"{t} floor p50"][-1])
    median = {key: statistics.median(values) for key, values in figures.items()}
    plain: Rounds = {}
    pairs = [
        [("stdio", bench_plain.over_stdio, [str(BIN), *stdio_args]), ("stdio floor", bench_plain.over_stdio, [node, "-e", BARE_STDIO])],
        [("http", bench_plain.over_http, http_argv), ("http floor", bench_plain.over_http, [node, "-e", BARE_HTTP])],
    ]
    others = [
        ("stdio audited", bench_plain.over_stdio, [str(BIN), *stdio_args, "--audit", f"{cache}/audit.jsonl"]),
        ("stdio fixture", bench_plain.over_stdio, [str(BIN), *fixture_args]),
    ]
    for round_number in range(PLAIN_ROUNDS):
        in_order = [server for pair in pairs for server in in_turn(pair, round_number)]
        for name, measure, argv in in_order + others:
            measured = measure(argv, env)
            plain.setdefault(f"{name} p50", []).append(measured.p50)
            plain.setdefault(f"{name} cpu", []).append(measured.cpu)
            plain.setdefault(f"{name} faults", []).append(measured.faults)
        # Each server's figures less its floor's, measured beside it.
        for t in ("stdio", "http"):
            for key in ("p50", "cpu"):
                plain.setdefault(f"{t} added {key}", []).append(plain[f"{t} {key}"][-1] - plain[f"{t} floor {key}"][-1])
    plain_median = {key: statistics.median(values) for key, values in plain.items()}

    async with over_stdio(str(BIN), fixture_args, env) as server:
        for _ in range(200):
            await echo(server.session)
        idle = statistics.median([await echo(server.session) for _ in range(400)])
        spun = await beside_a_spinner(server)
        two = await while_looping(server, 2)
        many = await while_looping(server, 200)
    async with over_stdio(str(BIN), fixture_args, env) as server:
        peak, slept = await sleepers(server)
    # Python and JavaScript tools through MCP: the plain client over stdio,
    # beside the Rust `echo` of the same run (a fresh instance per call).
    interpreted: Rounds = {}
    for _ in range(ROUNDS):
        for name, wasm in [("python", POLYGLOT / "fixture-py.wasm"), ("javascript", POLYGLOT / "fixture-js.wasm")]:
            measured = bench_plain.over_stdio([str(BIN), "serve", "--stdio", "--tools", str(wasm)], env)
            interpreted.setdefault(f"{name} p50", []).append(measured.p50)
            interpreted.setdefault(f"{name} cpu", []).append(measured.cpu)
            interpreted.setdefault(f"{name} faults", []).append(measured.faults)
    interpreted_median = {key: statistics.median(values) for key, values in interpreted.items()}
    examples_rss, examples_start = {}, {}
    for name, tools in [("rust", EXAMPLE_TOOLS[:5]), ("all", EXAMPLE_TOOLS)]:
        examples = ["serve", "--stdio", "--tools", *map(str, tools)]
        # The first start compiles them; measure a start from the cache.
        for _ in range(2):
            async with over_stdio(str(BIN), examples, env) as server:
                await server.session.list_tools()
                await server.session.call_tool("calculate", {"expression": "1+1"})
                # Steady state: past the server's tidying after its loads
                # (500 ms on), then serving calls.
                await anyio.sleep(1.5)
                for i in range(40):
                    await server.session.call_tool("calculate", {"expression": f"{i}+1"})
                examples_rss[name] = rss_mib(server.pid)
        examples_start[name] = spawn_to_listing([str(BIN), *examples], env)
    floor_listing = spawn_to_listing([node, "-e", BARE_STDIO], env)

    us = lambda s: f"{s * 1e6:.0f} µs"  # noqa: E731
    print(f"MCP, official Python SDK {version()} as the client, tool `echo` of `tests/echo-tool`, medians of {SDK_ROUNDS} rounds")
    print(f"(floor: a bare Node.js responder doing no work; {os.cpu_count()} cores)")
    print()
    print("| measurement | stdio | stdio floor | HTTP | HTTP floor |")
    print("|---|---|---|---|---|")
    row = lambda name, f: print(f"| {name} | " + " | ".join(f(k) for k in ("stdio", "stdio floor", "http", "http floor")) + " |")  # noqa: E731
    row(f"sequential call p50 ({SEQUENTIAL} calls)", lambda k: us(median[f"{k} p50"]))
    row(f"calls/s, {IN_FLIGHT} in flight", lambda k: f"{median[f'{k} rate']:.0f}")
    row("server CPU per call, sequential", lambda k: us(median[f"{k} cpu"]))
    row(f"server CPU per call, {IN_FLIGHT} in flight", lambda k: us(median[f"{k} cpu16"]))
    row(f"the client's CPU per call, {IN_FLIGHT} in flight", lambda k: us(median[f"{k} client16"]))
    row(f"the client's share of one core, {IN_FLIGHT} in flight", lambda k: f"{median[f'{k} busy16']:.0%}")
    print()
    print("| ratio | stdio | HTTP |")
    print("|---|---|---|")
    for name, f in [
        ("added latency over the floor (median of the rounds' p50 minus the floor's)", lambda t: f"{median[f'{t} added p50'] * 1e6:+.0f} µs"),
        (f"calls/s with {IN_FLIGHT} in flight, share of the floor's (median of the rounds' shares)", lambda t: f"{median[f'{t} rate share']:.0%}"),
    ]:
        print(f"| {name} | {f('stdio')} | {f('http')} |")
    print()
    print(f"The same servers with a plain synchronous client (JSON lines; HTTP/1.1 keep-alive), {bench_plain.CALLS} calls, medians of {PLAIN_ROUNDS} rounds:")
    print()
    print("| plain client | stdio | stdio floor | HTTP | HTTP floor |")
    print("|---|---|---|---|---|")
    prow = lambda name, f: print(f"| {name} | " + " | ".join(f(k) for k in ("stdio", "stdio floor", "http", "http floor")) + " |")  # noqa: E731
    prow("sequential call p50", lambda k: us(plain_median[f"{k} p50"]))
    prow("server CPU per call", lambda k: us(plain_median[f"{k} cpu"]))
    added = lambda t, key: f"{plain_median[f'{t} added {key}'] * 1e6:+.0f} µs"  # noqa: E731
    print(f"| added latency / added CPU over the floor (medians of the rounds' differences) | {added('stdio', 'p50')} / {added('stdio', 'cpu')} | | {added('http', 'p50')} / {added('http', 'cpu')} | |")
    print()
    print("| plain client over stdio | without an audit log | with `--audit` | change |")
    print("|---|---|---|---|")
    for name, key in [("sequential call p50", "p50"), ("server CPU per call", "cpu")]:
        without, audited = plain_median[f"stdio {key}"], plain_median[f"stdio audited {key}"]
        print(f"| {name} | {us(without)} | {us(audited)} | {(audited - without) * 1e6:+.0f} µs |")
    print()
    print("| measurement | result |")
    print("|---|---|")
    print(f"| spawn to initialized, median of 7 (compiled components cached) / the floor's | {start * 1e3:.1f} ms / {floor_start * 1e3:.1f} ms |")
    ms = lambda s: f"{s * 1e3:.1f} ms"  # noqa: E731
    for name, what in [("rust", "the 5 Rust example tools"), ("all", "all 7 example tools")]:
        first, listed, count = examples_start[name]
        print(f"| spawn to `initialize` / to the whole `tools/list` ({count} tools), {what}, cached; target 20 ms | {ms(first)} / {ms(listed)} |")
    print(f"| the same, the floor (a bare Node.js responder, 1 tool) | {ms(floor_listing[0])} / {ms(floor_listing[1])} |")
    print(f"| RSS with the example tools loaded from the cache, 1.5 s on and 40 calls made: the 5 Rust ones / all 7 (with Python and JavaScript) | {examples_rss['rust']:.1f} MiB / {examples_rss['all']:.1f} MiB |")
    print(f"| echo p50 idle / with 2 endless calls / with 200 | {us(idle)} / {us(two)} / {us(many)} |")
    print(f"| ratio to idle with 2 / with 200 endless calls | {two / idle:.2f}x / {many / idle:.2f}x |")
    print(f"| echo p50 with another process spinning on one core, no endless call / ratio to idle | {us(spun)} / {spun / idle:.2f}x |")
    print(f"| peak RSS with {SLEEPERS} calls sleeping in a host call ({slept} of them succeeded) | {peak:.0f} MiB |")
    print()
    # Page faults: each page a fresh instance writes is copied first, and
    # wasmtime's reset keeps only 32 runs of them resident (docs/performance.md).
    print("| plain client over stdio, `echo`, fresh instance per call | p50 | server CPU per call | page faults per call |")
    print("|---|---|---|---|")
    for key, label in [("stdio", "Rust (`tests/echo-tool`, 20 host imports)"), ("stdio fixture", "Rust (`tests/fixture-tool`, 138 host imports)")]:
        print(f"| {label} | {us(plain_median[f'{key} p50'])} | {us(plain_median[f'{key} cpu'])} | {plain_median[f'{key} faults']:.1f} |")
    for name, label in [("python", "Python (`tests/fixture-py`)"), ("javascript", "JavaScript (`tests/fixture-js`)")]:
        p50, cpu, faults = (interpreted_median[f"{name} {k}"] for k in ("p50", "cpu", "faults"))
        print(f"| {label} | {us(p50)} | {us(cpu)} | {faults:.1f} |")
    print()
    print("Issue 41's targets, each beside its floor or baseline from this run:")
    print()
    print("| target | figure | floor or baseline | met |")
    print("|---|---|---|---|")
    met = lambda ok: "yes" if ok else "no"  # noqa: E731
    listed = examples_start["all"][1]
    print(f"| spawn to the whole `tools/list`, all 7 example tools, cached: ≤ 20 ms | {ms(listed)} | floor {ms(floor_listing[1])} | {met(listed <= 0.020)} |")
    for name in ("python", "javascript"):
        p50 = interpreted_median[f"{name} p50"]
        print(f"| {name} `echo` through MCP: ≤ 400 µs p50 | {us(p50)} | Rust `echo` {us(plain_median['stdio p50'])} | {met(p50 <= 400e-6)} |")
    # The rounds' spread beside a median: how far this machine's noise
    # moved the same comparison within the run.
    spread = lambda values, f: f"rounds {f(min(values))} to {f(max(values))}"  # noqa: E731
    signed = lambda s: f"{s * 1e6:+.0f} µs"  # noqa: E731
    for t, label in [("stdio", "stdio"), ("http", "HTTP")]:
        for client, rounds, medians in [("plain client", plain, plain_median), ("SDK client", figures, median)]:
            extra = medians[f"{t} added p50"]
            print(f"| added latency over the floor, {client}, {label}: ≤ +15 µs | {signed(extra)} ({spread(rounds[f'{t} added p50'], signed)}) | floor {us(medians[f'{t} floor p50'])} | {met(extra <= 15e-6)} |")
        cpu, cpu_added = plain_median[f"{t} cpu"], plain_median[f"{t} added cpu"]
        beside = f"; `tests/fixture-tool` {us(plain_median['stdio fixture cpu'])}" if t == "stdio" else ""
        print(f"| server CPU per call, plain client, {label}: ≤ the floor's | {us(cpu)} ({signed(cpu_added)} beside the floor; {spread(plain[f'{t} added cpu'], signed)}) | floor {us(plain_median[f'{t} floor cpu'])}{beside} | {met(cpu_added <= 0)} |")
        share = median[f"{t} rate share"]
        client = f"the client {median[f'{t} busy16']:.0%} busy at {us(median[f'{t} client16'])} a call, against {us(median[f'{t} floor client16'])}"
        ratio = lambda r: f"{r:.2f}×"  # noqa: E731
        print(f"| calls/s at {IN_FLIGHT} in flight, SDK client, {label}: ≥ 1.05× the floor's | {share:.2f}× ({spread(figures[f'{t} rate share'], ratio)}) | floor {median[f'{t} floor rate']:.0f}/s; {client} | {met(share >= 1.05)} |")
    rss = examples_rss["rust"]
    from hot_code import listed_in  # it imports this module, so not at the top

    found, listed = listed_in(BIN)
    print(f"| RSS with the 5 Rust example tools: ≤ 20 MiB | {rss:.1f} MiB | serving code laid out together: {found} of the {listed} functions in `host/cli/hot-code.order` found (`make hot-code` refreshes it) | {met(rss <= 20)} |")
    print(f"| peak RSS, {SLEEPERS} calls in flight: ≤ 1 GiB | {peak:.0f} MiB | — | {met(peak <= 1024)} |")
    print(f"| `echo` with 200 endless calls running: ≤ 1.5× idle | {many / idle:.2f}× | idle {us(idle)}; another process spinning on one core instead: {spun / idle:.2f}× | {met(many / idle <= 1.5)} |")


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("mcp")


if __name__ == "__main__":
    if not BIN.is_file():
        sys.exit(f"{BIN} is missing: run `make setup`")
    anyio.run(main)
