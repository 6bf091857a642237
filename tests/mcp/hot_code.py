"""Writes `host/cli/hot-code.order`: the functions a serving `wasm-agent`
runs, in the order it first runs them, for the linker to lay out together.

A server drops its start's pages 500 ms after its loads (`resident.rs`);
what serving runs is then mapped again, 64 KiB around each page touched.
Scattered over 40 MiB of code, the serving path kept ~10 MiB resident;
laid out together, it keeps a fraction of that.

How: `perf record` counts every page fault of a server over stdio and one
over HTTP, each with the 5 Rust example tools, then of one with all 7:
`tools/list`, a call of every tool, then 40 calls. The faults after the start's pages are dropped
name the functions serving runs. Each fault maps 64 KiB, so one run only
sees the first function of each 64 KiB; the script links the binary with
what it found and runs again (`--rounds`), until a run finds nothing new.

Needs `perf` and a release build; run with `make hot-code`. A stale list
costs only memory: the linker skips names it does not find, and
`make bench` prints how many it found.
"""

from __future__ import annotations

import argparse
import bisect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
import bench_mcp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ORDER = ROOT / "host/cli/hot-code.order"
# The function that drops the start's pages: its own code faults again
# once it has dropped it, so its last fault marks where serving begins.
DROPPER = "resident::unmap_start_pages"


def perf_argv(data: Path, argv: list[str]) -> list[str]:
    return ["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", str(data), "--", *argv]


async def serve_over_stdio(binary: Path, env: dict[str, str], data: Path, tools: list[Path]) -> None:
    argv = perf_argv(data, [str(binary), "serve", "--stdio", "--tools", *map(str, tools)])
    async with bench_mcp.over_stdio(argv[0], argv[1:], env) as server:
        await exercise(server.session)


async def serve_over_http(binary: Path, env: dict[str, str], data: Path, tools: list[Path]) -> None:
    argv = perf_argv(data, [str(binary), "serve", "--http", "127.0.0.1:0", "--tools", *map(str, tools)])
    async with bench_mcp.over_http(argv, env) as server:
        await exercise(server.session)


async def exercise(session) -> None:
    await session.list_tools()
    # Past the server's tidying after its loads.
    await anyio.sleep(1.5)
    listed = (await session.list_tools()).tools
    for tool in listed:
        await session.call_tool(tool.name, {})
    for i in range(40):
        await session.call_tool("calculate", {"expression": f"{i}+1"})
    await anyio.sleep(0.5)


# The servers run: the 5 Rust example tools over stdio and over HTTP, then
# all 7 (the Python and JavaScript ones too) over stdio.
SERVERS = [
    (serve_over_stdio, bench_mcp.EXAMPLE_TOOLS[:5]),
    (serve_over_http, bench_mcp.EXAMPLE_TOOLS[:5]),
    (serve_over_stdio, bench_mcp.EXAMPLE_TOOLS),
]


def text_symbols(binary: Path) -> tuple[list[int], list[tuple[int, int, str]]]:
    """The binary's functions, by address: (starts, (start, size, name))."""
    listed = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True, check=True)
    symbols = []
    for line in listed.stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTW":
            symbols.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    symbols.sort()
    return [start for start, _, _ in symbols], symbols


def listed_in(binary: Path) -> tuple[int, int]:
    """How many of the functions `hot-code.order` lists `binary` has, of how many."""
    listed = set(ORDER.read_text().split())
    _, symbols = text_symbols(binary)
    return len(listed & {name for _, _, name in symbols}), len(listed)


def perf_script(data: Path, *options: str) -> list[str]:
    run = subprocess.run(["perf", "script", "-i", str(data), *options], capture_output=True, text=True, check=True)
    return run.stdout.splitlines()


def serving_functions(binary: Path, data: Path) -> list[str]:
    """The functions of `binary` that faulted after the start's pages were
    dropped, in the order they first did."""
    # Where the binary's code is mapped: [0xSTART(0xLEN) @ 0xOFFSET ...]: r-xp PATH
    mapped = [line for line in perf_script(data, "--show-mmap-events", "-F", "ip") if "PERF_RECORD_MMAP" in line]
    code = [line for line in mapped if line.endswith(f" r-xp {binary}")]
    if not code:
        raise SystemExit(f"perf saw no executable mapping of {binary}")
    span = code[-1].split("[", 1)[1]
    map_start = int(span.split("(", 1)[0], 16)
    map_offset = int(span.split("@ ", 1)[1].split()[0], 16)
    # One line per fault in each listing: the address, and the function.
    addresses = [int(line.split()[0], 16) for line in perf_script(data, "-F", "addr")]
    functions = perf_script(data, "-F", "ip,sym")
    dropped = [i for i, function in enumerate(functions) if DROPPER in function]
    if not dropped:
        raise SystemExit("the server did not drop its start's pages; run it for longer")
    starts, symbols = text_symbols(binary)
    file_offset, virtual_base = elf_text_offset(binary)
    found: dict[str, None] = {}
    for address in addresses[dropped[-1] + 1 :]:
        virtual = address - map_start + map_offset - file_offset + virtual_base
        i = bisect.bisect_right(starts, virtual) - 1
        if i >= 0:
            start, size, name = symbols[i]
            if start <= virtual < start + max(size, 1):
                found.setdefault(name)
    return list(found)


def elf_text_offset(binary: Path) -> tuple[int, int]:
    """(file offset, virtual address) of the executable segment."""
    headers = subprocess.run(["readelf", "-lW", str(binary)], capture_output=True, text=True, check=True).stdout
    for line in headers.splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"] and fields[6:7] == ["R"] and fields[7:8] == ["E"]:
            return int(fields[1], 16), int(fields[2], 16)
    raise SystemExit(f"no executable segment in {binary}")


def link() -> None:
    subprocess.run(["cargo", "build", "--release", "-p", "wasm-agent-cli", "--bin", "wasm-agent"], cwd=ROOT, check=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="runs at most (default 6)")
    rounds = parser.parse_args().rounds
    binary = ROOT / "target/release/wasm-agent"
    order = [line for line in ORDER.read_text().splitlines() if line] if ORDER.exists() else []
    with tempfile.TemporaryDirectory(prefix="hot-code-") as scratch:
        env = {"WASM_AGENT_CACHE_DIR": scratch, "WASM_AGENT_DATA_DIR": scratch, "PATH": os.environ["PATH"]}
        link()
        # Compiled once, outside `perf`: the runs serve from the cache.
        tools = [str(tool) for tool in bench_mcp.EXAMPLE_TOOLS]
        subprocess.run([str(binary), "compile", *tools], env=env, check=True, capture_output=True)
        # Names the binary no longer has (renamed functions, other
        # dependencies) go; the runs find what replaced them.
        _, symbols = text_symbols(binary)
        present = {name for _, _, name in symbols}
        kept = [name for name in order if name in present]
        print(f"{len(order) - len(kept)} listed functions are no longer in the binary; dropped")
        if kept != order:
            order = kept
            write_order(order)
            link()
        for round in range(1, rounds + 1):
            new = []
            for run, (serve, tools) in enumerate(SERVERS):
                data = Path(scratch) / f"{run}.data"
                await serve(binary, env, data, tools)
                new += [name for name in serving_functions(binary, data) if name not in order and name not in new]
            print(f"round {round}: {len(new)} functions not listed yet")
            if not new:
                break
            order += new
            write_order(order)
            link()
    print(f"{ORDER.relative_to(ROOT)}: {len(order)} functions")


def write_order(order: list[str]) -> None:
    ORDER.write_text("".join(f"{name}\n" for name in order))


if __name__ == "__main__":
    anyio.run(main)
