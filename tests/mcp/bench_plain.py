"""The MCP server's own cost, seen by the plainest possible client.

The official SDKs add hundreds of microseconds of their own per call, and
their scheduling decides how long a server sleeps between calls. Here a
synchronous client writes one request and reads one response, JSON lines over
the pipes or HTTP/1.1 keep-alive with `http.client`, so what is left is the
server's work and the operating system's hand-offs. Each server is measured
against the same bare responder as in `bench_mcp.py`.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

CALLS = 3000
WARM_UP = 300
VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "plain", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(i: int) -> dict:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}


def process_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    fields = process_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    return int(process_stat(pid)[7])


class Measured(NamedTuple):
    """Of CALLS sequential calls: the p50 latency, and the server's CPU
    seconds and minor page faults per call."""
    p50: float
    cpu: float
    faults: float


def measure(pid: int, roundtrip: Callable[[int], bytes]) -> Measured:
    """CALLS sequential calls, after WARM_UP of them, measured."""
    for i in range(WARM_UP):
        roundtrip(i + 1)
    latencies = []
    cpu, faults = cpu_seconds(pid), minor_faults(pid)
    for i in range(CALLS):
        started = time.perf_counter()
        answer = roundtrip(i + WARM_UP + 1)
        latencies.append(time.perf_counter() - started)
        if b'"hi"' not in answer:
            raise SystemExit(f"unexpected answer: {answer[:200]!r}")
    cpu = (cpu_seconds(pid) - cpu) / CALLS
    faults = (minor_faults(pid) - faults) / CALLS
    latencies.sort()
    return Measured(latencies[len(latencies) // 2], cpu, faults)


@contextmanager
def spawned(argv: list[str], env: dict[str, str], **pipes) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(argv, env=env, **pipes)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(10)


def over_stdio(argv: list[str], env: dict[str, str]) -> Measured:
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "bufsize": 0}
    with spawned(argv, env, **pipes) as process:
        send = lambda message: process.stdin.write((json.dumps(message) + "\n").encode())  # noqa: E731
        # Read as a client reads, a buffer at a time: an unbuffered pipe's
        # readline reads one byte per system call, which charged the server
        # about a microsecond of the client's time per byte of its answer.
        answers = io.BufferedReader(process.stdout)
        send(INITIALIZE)
        answers.readline()
        send(INITIALIZED)

        def roundtrip(i: int) -> bytes:
            send(call(i))
            return answers.readline()

        return measure(process.pid, roundtrip)


def over_http(argv: list[str], env: dict[str, str]) -> Measured:
    pipes = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True}
    with spawned(argv, env, **pipes) as process:
        address = None
        for line in process.stderr:
            if match := re.search(r"serving MCP on http://([\d.]+):(\d+)/mcp", line):
                address = match.group(1), int(match.group(2))
                break
        if address is None:
            raise SystemExit(f"{argv[0]} did not start serving")
        connection = http.client.HTTPConnection(*address)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

        def post(message: dict) -> bytes:
            connection.request("POST", "/mcp", json.dumps(message), headers)
            response = connection.getresponse()
            if session := response.getheader("mcp-session-id"):
                headers.update({"mcp-session-id": session, "mcp-protocol-version": VERSION})
            return response.read()

        post(INITIALIZE)
        post(INITIALIZED)
        return measure(process.pid, lambda i: post(call(i)))
