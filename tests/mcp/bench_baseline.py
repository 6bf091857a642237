"""This build against an earlier one (BASELINE: its `wasm-agent` binary), side
by side in one run, in interleaved rounds: is any call slower?

- MCP: p50 latency and server CPU per call of `echo` over stdio and HTTP, as
  `bench_plain.py` measures them (a plain client, no SDK of its own).
- The agent loop: `wasm-agent run` against a scripted model on loopback that
  asks for TURNS calls of `echo`, one per turn; the time per turn (a model
  request and a tool call), the process's start taken out by a run with no
  tool call.

`make bench BASELINE=path/to/wasm-agent` runs it after the other benchmarks.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bench_plain

ROOT = Path(__file__).resolve().parents[2]
WASM = ROOT / "target/wasm32-wasip2/release"
ROUNDS = 9
TURNS = 200


class Model(BaseHTTPRequestHandler):
    """OpenAI's chat completions: a call of `echo` while the conversation has
    fewer than `turns` tool results, then a text answer."""

    turns = TURNS

    def do_POST(self):  # noqa: N802 (the standard library's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        done = sum(1 for message in body["messages"] if message["role"] == "tool")
        if done < self.turns:
            call = {"id": f"c{done}", "type": "function", "function": {"name": "echo", "arguments": '{"text": "hi"}'}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "done"}, "stop"
        answer = json.dumps({
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


def run_seconds(binary: str, url: str, turns: int, env: dict[str, str]) -> float:
    Model.turns = turns
    argv = [binary, "run", "Go.", "--model", "openai:m", "--base-url", url, "--tools", str(WASM / "fixture_tool.wasm"),
            "--max-roundtrips", str(turns + 1), "--data-dir", env["WASM_AGENT_DATA_DIR"]]
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    baseline = os.environ.get("BASELINE")
    current = os.environ.get("WASM_AGENT_BIN") or str(ROOT / "target/release/wasm-agent")
    if not baseline or not Path(baseline).is_file():
        sys.exit("BASELINE must name the earlier build's wasm-agent binary")
    cache = tempfile.mkdtemp(prefix="wasm-agent-baseline-")
    env = {"WASM_AGENT_CACHE_DIR": cache, "WASM_AGENT_DATA_DIR": cache, "PATH": os.environ["PATH"],
           "OPENAI_API_KEY": "sk-bench"}
    fixture = ["--tools", str(WASM / "fixture_tool.wasm"), "--timeout", "30s"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"

    builds = {"baseline": baseline, "this": current}
    figures: dict[str, list[float]] = {}
    for binary in builds.values():  # compile into the cache first
        run_seconds(binary, url, 1, env)
    for _ in range(ROUNDS):
        for name, binary in builds.items():
            for transport, measure, argv in [
                ("stdio", bench_plain.over_stdio, [binary, "serve", "--stdio", *fixture]),
                ("http", bench_plain.over_http, [binary, "serve", "--http", "127.0.0.1:0", *fixture]),
            ]:
                measured = measure(argv, env)
                figures.setdefault(f"{name} mcp {transport} p50", []).append(measured.p50)
                figures.setdefault(f"{name} mcp {transport} cpu", []).append(measured.cpu)
            per_turn = (run_seconds(binary, url, TURNS, env) - run_seconds(binary, url, 0, env)) / TURNS
            figures.setdefault(f"{name} agent turn", []).append(per_turn)
    server.shutdown()

    print(f"This build against BASELINE ({ROUNDS} interleaved rounds, medians; ratio = this / baseline)")
    for measure in ["mcp stdio p50", "mcp stdio cpu", "mcp http p50", "mcp http cpu", "agent turn"]:
        then = statistics.median(figures[f"baseline {measure}"])
        now = statistics.median(figures[f"this {measure}"])
        print(f"  {measure:<15} baseline {then * 1e6:8.1f} us   this {now * 1e6:8.1f} us   ratio {now / then:.3f}")


if __name__ == "__main__":
    main()
