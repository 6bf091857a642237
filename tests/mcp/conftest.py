"""Fixtures for the MCP end-to-end tests.

The server under test is `wasm-agent serve`, driven by the official Python
`mcp` SDK (2.x) over stdio and streamable HTTP, with the legacy `initialize`
handshake. Every server process a test starts is killed in teardown, and its
stdout/stderr are appended to the report of a failing test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("WASM_AGENT_BIN") or REPO_ROOT / "target/release/wasm-agent")
WASM_DIR = Path(os.environ.get("WASM_DIR") or REPO_ROOT / "target/wasm32-wasip2/release")

URL_LINE = re.compile(r"^wasm-agent: serving MCP on (http://\S+/mcp)\s*$")
STARTUP_TIMEOUT = 30.0
# Per request, so a server that never answers fails the test instead of hanging it.
READ_TIMEOUT = 30.0
TRANSPORTS = ["stdio", "http"]

# Variables that would change the server's behaviour if inherited from the caller.
SCRUBBED_ENV = ("WASM_AGENT_MCP_TOKEN", "WASM_AGENT_CONFIG", "RUST_LOG")


def wasm(name: str) -> Path:
    """Path of a built component, e.g. wasm("calculator")."""
    return WASM_DIR / f"{name}.wasm"


def approval_config(tmp_path: Path, extra: str = "") -> Path:
    """A wasm-agent.toml with the calculator (its calculate needs approval),
    the echo tool, and `extra` sections."""
    path = tmp_path / "wasm-agent.toml"
    path.write_text(
        f"""{extra}
[tools.calc]
component = "{wasm('calculator')}"

[tools.echo]
component = "{wasm('echo_tool')}"

[agent.tools.calculate]
requires_approval = "always"
"""
    )
    return path


def text_of(result: types.CallToolResult) -> str:
    """All text blocks of a result, joined by newlines."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def names_of(listing: types.ListToolsResult) -> set[str]:
    return {tool.name for tool in listing.tools}


def dump(result: Any) -> str:
    """A result as wire JSON, for assertion messages."""
    return result.model_dump_json(by_alias=True, exclude_none=True)


# ---------------------------------------------------------------- notifications


class ListChanged:
    """Counts notifications/tools/list_changed seen by a session's message_handler."""

    def __init__(self) -> None:
        self.count = 0

    async def handler(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1

    async def wait_for_tools(
        self,
        session: ClientSession,
        since: int,
        predicate: Callable[[set[str]], bool],
        what: str,
        timeout: float = 10.0,
    ) -> set[str]:
        """Wait for a list_changed after `since`, then re-list until `predicate` holds."""
        names: set[str] | None = None
        with anyio.move_on_after(timeout):
            while True:
                while self.count <= since:
                    await anyio.sleep(0.05)
                since = self.count
                names = names_of(await session.list_tools())
                if predicate(names):
                    return names
        if self.count == 0 or names is None:
            pytest.fail(f"{what}: no notifications/tools/list_changed within {timeout}s")
        pytest.fail(f"{what}: {self.count} list_changed notification(s), but tools/list still shows {sorted(names)}")


# ---------------------------------------------------------------- pytest plumbing


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_LOGS_ATTR = "_wasm_agent_logs"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for label, read in getattr(item, _LOGS_ATTR, []):
            try:
                text = read()
            except Exception as error:  # pragma: no cover - diagnostics only
                text = f"(cannot read: {error})"
            report.sections.append((f"wasm-agent server {label}", text or "(empty)"))


def _register_log(request: pytest.FixtureRequest, label: str, read: Callable[[], str]) -> None:
    logs = getattr(request.node, _LOGS_ATTR, None)
    if logs is None:
        logs = []
        setattr(request.node, _LOGS_ATTR, logs)
    logs.append((label, read))


@pytest.fixture(scope="session")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Extra environment for every server: a private compile cache and data dir."""
    if not BIN.is_file():
        pytest.fail(f"wasm-agent binary not found at {BIN} (set WASM_AGENT_BIN or build it)")
    missing = [n for n in ("calculator", "echo_tool", "fixture_tool") if not wasm(n).is_file()]
    if missing:
        pytest.fail(f"components {missing} not found in {WASM_DIR} (set WASM_DIR or build the guests)")
    root = tmp_path_factory.mktemp("wasm-agent-home")
    return {
        "WASM_AGENT_CACHE_DIR": str(root / "cache"),
        "WASM_AGENT_DATA_DIR": str(root / "data"),
    }


def _single_leaf(group: BaseExceptionGroup) -> BaseException | None:
    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)

    walk(group)
    return leaves[0] if len(leaves) == 1 and isinstance(leaves[0], Exception) else None


@asynccontextmanager
async def _unwrapped(manager: Any) -> AsyncIterator[Any]:
    """Re-raise a lone failure out of the SDK's task-group ExceptionGroups, for readable reports."""
    try:
        async with manager as value:
            yield value
    except BaseExceptionGroup as group:
        leaf = _single_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


# ---------------------------------------------------------------- HTTP servers


class HttpServer:
    """A `wasm-agent serve --http 127.0.0.1:0` process; `url` is read from its stderr."""

    def __init__(self, args: Sequence[str], env: dict[str, str]) -> None:
        self.argv = [str(BIN), "serve", "--http", "127.0.0.1:0", *map(str, args)]
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._lock = threading.Lock()
        self._url_found = threading.Event()
        self.url: str | None = None
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self._threads = [
            threading.Thread(target=self._drain, args=(self.process.stdout, self._stdout, False), daemon=True),
            threading.Thread(target=self._drain, args=(self.process.stderr, self._stderr, True), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _drain(self, pipe: Any, lines: list[str], watch_url: bool) -> None:
        for line in pipe:
            with self._lock:
                lines.append(line)
            if watch_url and self.url is None and (match := URL_LINE.match(line.rstrip("\n"))):
                self.url = match.group(1)
                self._url_found.set()
        self._url_found.set()  # EOF: wake the waiter, which sees url is None

    def wait_url(self, timeout: float = STARTUP_TIMEOUT) -> str:
        self._url_found.wait(timeout)
        if self.url is None:
            try:
                code = self.process.wait(2)
                state = f"exited with code {code} before printing it"
            except subprocess.TimeoutExpired:
                state = f"still running, nothing printed within {timeout}s"
            raise AssertionError(
                f"no 'wasm-agent: serving MCP on http://.../mcp' line on stderr ({state}); "
                f"argv={self.argv}\n{self.output()}"
            )
        return self.url

    @property
    def authority(self) -> str:
        """host:port of the URL (what a correct Host header carries)."""
        assert self.url is not None
        return httpx2.URL(self.url).netloc.decode()

    @property
    def port(self) -> int:
        assert self.url is not None
        return httpx2.URL(self.url).port  # type: ignore[return-value]

    def output(self) -> str:
        with self._lock:
            return "--- stderr ---\n" + "".join(self._stderr) + "--- stdout ---\n" + "".join(self._stdout)

    def stderr_lines(self) -> list[str]:
        with self._lock:
            return list(self._stderr)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        for thread in self._threads:
            thread.join(2)


@pytest.fixture
def postgres():
    """A private PostgreSQL cluster for the test (see servers.Postgres)."""
    from servers import Postgres

    cluster = Postgres()
    yield cluster
    cluster.close()


@pytest.fixture
def launch_http(request: pytest.FixtureRequest, server_env: dict[str, str]):
    """Factory: launch_http(*args, env={...}) starts a server and waits for its URL."""
    servers: list[HttpServer] = []

    def launch(*args: str | Path, env: dict[str, str] | None = None) -> HttpServer:
        full_env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        full_env |= server_env | (env or {})
        server = HttpServer([str(a) for a in args], full_env)
        servers.append(server)
        _register_log(request, f"#{len(servers)} (http) {' '.join(server.argv[1:])}", server.output)
        server.wait_url()
        return server

    yield launch
    for server in servers:
        server.stop()


def http_session(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    message_handler: Any = None,
    read_timeout: float = READ_TIMEOUT,
    elicitation_callback: Any = None,
):
    """An initialized SDK session over streamable HTTP; `headers` go on every HTTP request.
    With `elicitation_callback` the client declares elicitation and answers with it."""
    return _unwrapped(
        _http_session(
            url,
            headers=headers,
            message_handler=message_handler,
            read_timeout=read_timeout,
            elicitation_callback=elicitation_callback,
        )
    )


@asynccontextmanager
async def _http_session(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    message_handler: Any = None,
    read_timeout: float = READ_TIMEOUT,
    elicitation_callback: Any = None,
) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with _initialized(read, write, message_handler, read_timeout, elicitation_callback) as session:
                yield session


@asynccontextmanager
async def _initialized(
    read: Any, write: Any, message_handler: Any, read_timeout: float, elicitation_callback: Any
) -> AsyncIterator[ClientSession]:
    """An SDK client session on a transport's streams, after `initialize`."""
    async with ClientSession(
        read,
        write,
        read_timeout_seconds=read_timeout,
        message_handler=message_handler,
        elicitation_callback=elicitation_callback,
    ) as session:
        await session.initialize()
        yield session


# ---------------------------------------------------------------- stdio servers


@pytest.fixture
def stdio_session(request: pytest.FixtureRequest, server_env: dict[str, str], tmp_path: Path):
    """Factory: `async with stdio_session(*args) as session` spawns `serve --stdio` via the SDK."""
    count = 0

    @asynccontextmanager
    async def open_(
        *args: str | Path,
        env: dict[str, str] | None = None,
        message_handler: Any = None,
        read_timeout: float = READ_TIMEOUT,
        elicitation_callback: Any = None,
    ) -> AsyncIterator[ClientSession]:
        nonlocal count
        count += 1
        argv = ["serve", "--stdio", *map(str, args)]
        log_path = tmp_path / f"stdio-server-{count}.stderr"
        _register_log(
            request,
            f"#{count} (stdio) {' '.join(argv)} stderr",
            lambda: log_path.read_text(errors="replace") if log_path.exists() else "",
        )
        params = StdioServerParameters(command=str(BIN), args=argv, env=server_env | (env or {}))
        # stdio_client passes errlog to the child as its stderr: it must be a real file.
        with open(log_path, "w") as errlog:
            stdio = _stdio(params, errlog, message_handler, read_timeout, elicitation_callback)
            async with _unwrapped(stdio) as session:
                yield session

    return open_


@asynccontextmanager
async def _stdio(
    params: StdioServerParameters,
    errlog: Any,
    message_handler: Any,
    read_timeout: float,
    elicitation_callback: Any = None,
):
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with _initialized(read, write, message_handler, read_timeout, elicitation_callback) as session:
            yield session


# ---------------------------------------------------------------- either transport


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def open_session(transport: str, launch_http, stdio_session):
    """Factory: `async with open_session(*serve_args, ...) as session` on the test's transport."""

    @asynccontextmanager
    async def open_(
        *args: str | Path,
        env: dict[str, str] | None = None,
        message_handler: Any = None,
        read_timeout: float = READ_TIMEOUT,
        elicitation_callback: Any = None,
    ) -> AsyncIterator[ClientSession]:
        client = {
            "message_handler": message_handler,
            "read_timeout": read_timeout,
            "elicitation_callback": elicitation_callback,
        }
        if transport == "http":
            server = launch_http(*args, env=env)
            async with http_session(server.url, **client) as session:
                yield session
        else:
            async with stdio_session(*args, env=env, **client) as session:
                yield session

    return open_


@pytest.fixture
def copy_component(tmp_path: Path) -> Callable[[str, Path], Path]:
    """copy_component("echo_tool", dir): atomically place a component into dir (staged beside it)."""
    staging = Path(tempfile.mkdtemp(dir=tmp_path, prefix="staging-"))

    def copy(name: str, directory: Path) -> Path:
        staged = staging / f"{name}.wasm.part"
        shutil.copyfile(wasm(name), staged)
        target = directory / f"{name}.wasm"
        os.replace(staged, target)
        return target

    return copy
