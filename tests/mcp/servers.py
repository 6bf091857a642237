"""Real servers the replica tests run beside `wasm-agent serve`, each on its
own loopback port and data folder: a private PostgreSQL cluster (its server
refuses to run as root, so under root it runs as the `postgres` user) and
HAProxy balancing round-robin, without stickiness, over the replicas."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


class Postgres:
    """A cluster that trusts local connections; `url` names its `postgres` database."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        bin_dir = os.environ.get("PG_BIN") or (found and str(Path(found[-1]).parent))
        if not bin_dir:
            raise RuntimeError("no PostgreSQL server binaries: install postgresql or set PG_BIN")
        self.bin = Path(bin_dir)
        self.dir = Path(tempfile.mkdtemp(prefix="wasm-agent-pg"))
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self._run("initdb", "-D", str(self.dir / "data"), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.start()

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(_as_postgres([str(self.bin / program), *args]), check=True, capture_output=True, cwd=self.dir)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        self._run("pg_ctl", "start", "-D", str(self.dir / "data"), "-w", "-o", options, "-l", str(self.dir / "log"))

    def stop(self) -> None:
        self._run("pg_ctl", "stop", "-D", str(self.dir / "data"), "-m", "immediate", "-w")

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class HAProxy:
    """HAProxy in front of two `backends` (host:port) with the example
    configuration `deploy/haproxy.cfg`: round-robin per request, each backend
    checked with GET /readyz (every 200 ms here)."""

    def __init__(self, backends: list[str]) -> None:
        assert len(backends) == 2, "deploy/haproxy.cfg names two replicas"
        self.dir = Path(tempfile.mkdtemp(prefix="wasm-agent-haproxy"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
        env = dict(
            os.environ,
            WASM_AGENT_LB_BIND=f"127.0.0.1:{self.port}",
            WASM_AGENT_CHECK_INTERVAL="200ms",
            WASM_AGENT_REPLICA_1=backends[0],
            WASM_AGENT_REPLICA_2=backends[1],
        )
        binary = shutil.which("haproxy")
        if binary is None:
            raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
        self.process = subprocess.Popen(
            [binary, "-db", "-f", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        wait_for_port(self.port, "haproxy")

    def close(self) -> str:
        """Stops it; returns its log (one line per request, naming the backend)."""
        self.process.kill()
        log, _ = self.process.communicate(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
        return log


class Redis:
    """A `redis-server` on a loopback port, keeping nothing on disk."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, "redis-server")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=5)


def tokens_file(path: Path, tokens: dict[str, tuple[str, str]]) -> Path:
    """A `--tokens` file at `path` giving each token its (principal, tenant)."""
    path.write_text(
        "\n".join(
            f'[[tokens]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\n'
            f'principal = "{principal}"\ntenant = "{tenant}"\n'
            for token, (principal, tenant) in tokens.items()
        )
    )
    return path


def wait_for_port(port: int, what: str) -> None:
    """Returns once something listens on 127.0.0.1:`port` (at most 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")
