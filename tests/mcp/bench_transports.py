"""wasm-agent's own MCP transports against rmcp's, with the same server
behind them, side by side in interleaved rounds: why `serve` keeps its own.

The server (`McpServer`, every call down the call pipeline) is the same; in
front of it either wasm-agent's transports (`serve --stdio`: its own loop on
non-blocking pipes; `serve --http`: its own sessions) or rmcp's
(`host/mcp/examples/rmcp_transports.rs`: the service loop on
`rmcp::transport::stdio()` and on rmcp's non-blocking pipes, and
`StreamableHttpService` with sessions). Measured as `bench_plain.py` does
(a plain client, so what is left is the server's work): p50 latency and
server CPU per call of `echo`.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import bench_plain

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("WASM_AGENT_BIN") or str(ROOT / "target/release/wasm-agent")
RMCP = str(ROOT / "target/release/examples/rmcp_transports")
FIXTURE = str(ROOT / "target/wasm32-wasip2/release/fixture_tool.wasm")
ROUNDS = 5


def main() -> None:
    if not Path(RMCP).is_file():
        sys.exit(f"{RMCP} is missing: cargo build --release -p wasm-agent-mcp --example rmcp_transports")
    cache = tempfile.mkdtemp(prefix="wasm-agent-transports-")
    env = {"WASM_AGENT_CACHE_DIR": cache, "WASM_AGENT_DATA_DIR": cache, "PATH": os.environ["PATH"]}
    fixture = ["--tools", FIXTURE, "--timeout", "30s"]
    servers = [
        ("stdio", "wasm-agent", bench_plain.over_stdio, [BIN, "serve", "--stdio", *fixture]),
        ("stdio", "rmcp stdio()", bench_plain.over_stdio, [RMCP, "stdio", FIXTURE]),
        ("stdio", "rmcp pipes", bench_plain.over_stdio, [RMCP, "stdio-pipes", FIXTURE]),
        ("http", "wasm-agent", bench_plain.over_http, [BIN, "serve", "--http", "127.0.0.1:0", *fixture]),
        ("http", "rmcp service", bench_plain.over_http, [RMCP, "http", FIXTURE]),
    ]
    figures: dict[tuple[str, str], list[bench_plain.Measured]] = {}
    for _ in range(ROUNDS):
        for transport, name, measure, argv in servers:
            figures.setdefault((transport, name), []).append(measure(argv, env))

    print(f"MCP transports, the same server behind each ({ROUNDS} interleaved rounds, medians, plain client)")
    for transport in ("stdio", "http"):
        ours = figures[(transport, "wasm-agent")]
        ours_p50 = statistics.median(m.p50 for m in ours)
        ours_cpu = statistics.median(m.cpu for m in ours)
        for (kind, name), rounds in figures.items():
            if kind != transport:
                continue
            p50 = statistics.median(m.p50 for m in rounds)
            cpu = statistics.median(m.cpu for m in rounds)
            print(
                f"  {transport:<5} {name:<13} p50 {p50 * 1e6:7.1f} us ({p50 / ours_p50:4.2f}x)"
                f"   server CPU/call {cpu * 1e6:6.1f} us ({cpu / ours_cpu:4.2f}x)"
            )


if __name__ == "__main__":
    main()
