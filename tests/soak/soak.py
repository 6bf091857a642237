"""`make soak`: `wasm-agent serve` driven through many mixed calls.

Ordinary calls, endless loops, memory bombs, output floods, denied
capabilities, cancellations and concurrent sessions, over stdio and over
streamable HTTP (raw JSON-RPC, 16 calls in flight). It samples the server's
RSS and open descriptors as it goes and prints the curve. It passes when
every call was answered with the kind its tool must give, the server never
died, its RSS ended within a small bound of its warm baseline and its
descriptors stayed flat.

    python tests/soak/soak.py [CALLS]     (default 100000, half per transport)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import httpx2 as httpx  # the HTTP client the MCP SDK (tests/mcp/requirements.txt) brings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("WASM_AGENT_BIN") or ROOT / "target/release/wasm-agent")
FIXTURE = ROOT / "target/wasm32-wasip2/release/fixture_tool.wasm"
IN_FLIGHT = 16
SESSIONS = 8
RSS_BOUND_MIB = 24
FD_BOUND = 8
# The fixture twice: ordinary calls with a roomy deadline, and the looping
# and sleeping tools (prefixed h_) under a short one.
CONFIG = f"""
[tools.tool]
component = "{FIXTURE}"
timeout = "5s"
memory = "16MiB"

[tools.hostile]
component = "{FIXTURE}"
prefix = "h_"
timeout = "100ms"
memory = "16MiB"
"""
CONFIG_FILE = ROOT / "target/soak.toml"
SERVER_ARGS = ["--config", str(CONFIG_FILE), "--max-concurrency", "32",
               "--cache-dir", str(ROOT / "target/test-cache")]

# (weight, tool, arguments, expected kind: None = success with this text)
MIX = [
    (70, "echo", {"text": "soak"}, None),
    (6, "state_set", {"key": "k", "value": 1}, None),
    (6, "state_get", {"key": "k"}, None),
    (1, "h_spin", {}, "timeout"),
    (2, "alloc", {}, "memory_limit"),
    (2, "stdout_flood", {"bytes": 1 << 20}, None),
    (3, "tcp_connect", {"addr": "10.0.0.1:80"}, "capability_denied"),
    (3, "read_path", {"path": "/etc/passwd"}, "failed"),
    (2, "big_output", {"bytes": 2 << 20}, "output_too_large"),
    (1, "panic", {"message": "soak"}, "trap"),
    (2, "h_sleep", {"ms": 5000}, "cancel"),
    (2, "recurse", {}, "stack_overflow"),
]
CHOICES = [entry for entry in MIX for _ in range(entry[0])]


def sample(pid: int) -> tuple[float, int]:
    """RSS in MiB and the number of open descriptors of `pid`."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def verdict(tool: str, expected: str | None, response: dict) -> str | None:
    """None when the response is what the tool must give, else why not."""
    if expected == "cancel":
        # Cancelled calls may be answered or not; an answer must be an error.
        if response and not response.get("result", {}).get("isError", True):
            return f"{tool}: a cancelled call succeeded"
        return None
    result = response.get("result")
    if result is None:
        return f"{tool}: no result: {response}"
    kind = (result.get("structuredContent") or {}).get("error", {}).get("kind")
    if expected is None:
        if result.get("isError"):
            return f"{tool}: expected success, got {kind}"
        return None
    if kind != expected:
        return f"{tool}: expected {expected}, got {kind}: {result.get('content')}"
    return None


class Stats:
    def __init__(self, name: str) -> None:
        self.name, self.calls, self.failures, self.curve = name, 0, [], []
        self.baseline: tuple[float, int] = (0.0, 0)
        self.end: tuple[float, int] = (0.0, 0)


async def quiet_sample(pid: int, send) -> tuple[float, int]:
    """A sample once no call is running and the server has settled. The
    allocator gives freed memory back a second after it was freed, but only
    when it next runs: a few calls after that second let it, so both samples
    see the heap in the same state."""
    for _ in range(2):
        await asyncio.sleep(1.2)
        for _ in range(4):
            await send(0, "echo", {"text": "quiet"}, False)
    await asyncio.sleep(0.2)
    return sample(pid)


async def drive(stats: Stats, calls: int, pid: int, send) -> None:
    """Runs `calls` mixed calls through `send(session, tool, args, cancel)`:
    a fifth to warm up, a quiet sample (the baseline), the rest with samples
    on the way, and a quiet sample at the end.

    Each memory slot of the pool keeps up to 2 MiB of the pages its calls
    wrote resident, so RSS rises, to a bound, as more slots come into use.
    Over stdio a call runs on the connection's own thread and slots come
    into use slowly, so the warm-up goes on, a tenth at a time (at most
    three), until the quiet RSS rises by less than 2 MiB: the baseline is
    then the plateau, and what grows past it is the server's."""
    warm = max(calls // 5, 1)
    await run_calls(stats, warm, pid, send, every=0)
    stats.baseline = await quiet_sample(pid, send)
    for _ in range(3):
        await run_calls(stats, warm // 2, pid, send, every=0)
        settled, stats.baseline = stats.baseline, await quiet_sample(pid, send)
        if stats.baseline[0] - settled[0] < 2:
            break
    await run_calls(stats, calls - warm, pid, send, every=max(calls // 10, 1))
    stats.end = await quiet_sample(pid, send)


async def run_calls(stats: Stats, calls: int, pid: int, send, every: int) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(calls):
        queue.put_nowait(i)

    async def worker(session: int) -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            _, tool, args, expected = random.choice(CHOICES)
            response = await send(session, tool, args, expected == "cancel")
            problem = verdict(tool, expected, response)
            if problem:
                stats.failures.append(problem)
            stats.calls += 1
            if every and stats.calls % every == 0:
                stats.curve.append((stats.calls, *sample(pid)))

    await asyncio.gather(*(worker(i % SESSIONS) for i in range(IN_FLIGHT)))


async def soak_stdio(calls: int) -> Stats:
    stats = Stats("stdio")
    process = await asyncio.create_subprocess_exec(
        str(BIN), "serve", "--stdio", *SERVER_ARGS,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=64 << 20)
    pending: dict[int, asyncio.Future] = {}
    ids = iter(range(1, 1 << 62))

    async def read() -> None:
        while line := await process.stdout.readline():
            message = json.loads(line)
            future = pending.pop(message.get("id"), None)
            if future and not future.done():
                future.set_result(message)

    def write(message: dict) -> None:
        process.stdin.write((json.dumps(message) + "\n").encode())

    reader = asyncio.create_task(read())

    async def request(method: str, params: dict, cancel: bool = False) -> dict:
        request_id = next(ids)
        future = asyncio.get_running_loop().create_future()
        pending[request_id] = future
        write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if cancel:
            await asyncio.sleep(0.02)
            write({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": request_id, "reason": "soak"}})
            try:
                return await asyncio.wait_for(future, 0.5)
            except asyncio.TimeoutError:
                pending.pop(request_id, None)
                return {}
        return await asyncio.wait_for(future, 30)

    await request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "soak", "version": "0"}})
    write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def send(_session, tool, args, cancel):
        return await request("tools/call", {"name": tool, "arguments": args}, cancel)

    await drive(stats, calls, process.pid, send)
    process.stdin.close()
    await asyncio.wait_for(process.wait(), 20)
    reader.cancel()
    if process.returncode != 0:
        stats.failures.append(f"stdio server exited with {process.returncode}")
    return stats


async def soak_http(calls: int) -> Stats:
    stats = Stats("http")
    process = await asyncio.create_subprocess_exec(
        str(BIN), "serve", "--http", "127.0.0.1:0", *SERVER_ARGS,
        stderr=asyncio.subprocess.PIPE)
    url = None
    while url is None:
        line = (await process.stderr.readline()).decode()
        if not line:
            raise SystemExit("the HTTP server did not start")
        if line.startswith("wasm-agent: serving MCP on "):
            url = line.split(" on ", 1)[1].strip()
    asyncio.create_task(process.stderr.read())
    headers = {"accept": "application/json, text/event-stream"}
    limits = httpx.Limits(max_connections=IN_FLIGHT * 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        async def post(body: dict, session: str | None = None) -> httpx.Response:
            extra = {"mcp-session-id": session} if session else {}
            return await client.post(url, json=body, headers={**headers, **extra})

        def parse(response: httpx.Response, request_id: int) -> dict:
            for line in response.text.splitlines():
                text = line[5:] if line.startswith("data:") else line
                try:
                    message = json.loads(text)
                except ValueError:
                    continue
                if message.get("id") == request_id:
                    return message
            return {}

        sessions = []
        for _ in range(SESSIONS):
            response = await post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "soak", "version": "0"}}})
            session = response.headers["mcp-session-id"]
            await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            sessions.append(session)
        ids = iter(range(1, 1 << 62))

        async def send(session, tool, args, cancel):
            request_id = next(ids)
            body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}}
            call = asyncio.create_task(post(body, sessions[session]))
            if cancel:
                await asyncio.sleep(0.02)
                await post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": request_id}}, sessions[session])
                try:
                    return parse(await asyncio.wait_for(call, 5), request_id)
                except asyncio.TimeoutError:
                    return {}
            return parse(await call, request_id)

        await drive(stats, calls, process.pid, send)
    process.terminate()
    code = await asyncio.wait_for(process.wait(), 20)
    if code != 0:
        stats.failures.append(f"HTTP server exited with {code}")
    return stats


def report(stats: Stats, elapsed: float) -> bool:
    print(f"\n== {stats.name}: {stats.calls} calls in {elapsed:.0f} s "
          f"({stats.calls / elapsed:.0f}/s), {len(stats.failures)} wrong")
    print(f"{'calls':>8}  {'RSS MiB':>8}  {'fds':>4}")
    for calls, rss, fds in stats.curve:
        print(f"{calls:>8}  {rss:>8.1f}  {fds:>4}")
    for failure in stats.failures[:10]:
        print("  wrong:", failure)
    ok = not stats.failures
    (warm_rss, warm_fds), (end_rss, end_fds) = stats.baseline, stats.end
    grown = end_rss - warm_rss
    print(f"quiet: RSS {warm_rss:.1f} MiB after warm-up -> {end_rss:.1f} MiB at the end "
          f"({grown:+.1f}); fds {warm_fds} -> {end_fds}")
    if grown > RSS_BOUND_MIB:
        print(f"  FAIL: RSS grew more than {RSS_BOUND_MIB} MiB")
        ok = False
    if end_fds > warm_fds + FD_BOUND:
        print(f"  FAIL: descriptors grew by more than {FD_BOUND}")
        ok = False
    return ok


async def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    CONFIG_FILE.write_text(CONFIG)
    random.seed(11)
    ok = True
    for soak in (soak_stdio, soak_http):
        started = time.monotonic()
        stats = await soak(calls // 2)
        ok = report(stats, time.monotonic() - started) and ok
    print("\nsoak:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
