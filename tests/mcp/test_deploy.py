"""The deployment examples in deploy/ agree with the real binary: every flag
the Deployment passes exists, its probes point at the address that serves
them, the ConfigMap's config loads with the real components, and the Secret's
token table and request-state keys are ones `serve` accepts. (HAProxy's example, deploy/haproxy.cfg,
runs in test_replicas.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import yaml

from conftest import BIN, REPO_ROOT, WASM_DIR

KUBE = REPO_ROOT / "deploy" / "kubernetes"


def manifests() -> dict[str, dict]:
    found = {}
    for path in sorted(KUBE.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def container() -> dict:
    return manifests()["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_the_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present
    assert set(manifests()) >= {"ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler"}


def test_every_flag_of_the_deployment_is_one_serve_takes() -> None:
    args = container()["args"]
    assert args[0] == "serve"
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    for flag in (a for a in args if a.startswith("--")):
        assert re.search(rf"\s{re.escape(flag)}[\s=<]", help_text), f"{flag} is not a flag of serve"
    for variable in container()["env"]:
        assert variable["name"] in help_text or variable["name"] == "WASM_AGENT_CACHE_DIR", variable


def test_probes_and_ports_match_the_addresses_served() -> None:
    spec = container()
    args = spec["args"]
    ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
    assert args[args.index("--http") + 1].endswith(f":{ports['mcp']}")
    assert args[args.index("--metrics-addr") + 1].endswith(f":{ports['metrics']}")
    assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    service = manifests()["Service"]
    assert {p["targetPort"] for p in service["spec"]["ports"]} == set(ports)
    assert service["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"


def test_the_configmap_config_and_the_secret_tokens_load(tmp_path: Path) -> None:
    config = manifests()["ConfigMap"]["data"]["wasm-agent.toml"]
    # The image keeps the example tools in /opt/wasm-agent/tools.
    config = config.replace("/opt/wasm-agent/tools", str(WASM_DIR))
    (tmp_path / "wasm-agent.toml").write_text(config)
    listed = subprocess.run(
        [BIN, "tools", "--config", tmp_path / "wasm-agent.toml", "--json"],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)}
    assert {"calculate", "current_weather", "json_query"} <= names, names

    # The Secret's token table and request-state keys are ones the server
    # starts with.
    secret = manifests()["Secret"]["stringData"]
    (tmp_path / "tokens.toml").write_text(secret["tokens.toml"])
    # Its key is a placeholder the server refuses; a real one replaces it.
    keys = secret["request-state-keys.toml"]
    assert "CHANGE-ME" in keys, keys
    (tmp_path / "keys.toml").write_text(re.sub(r'secret = "[^"]*"', f'secret = "{os.urandom(32).hex()}"', keys))
    server = subprocess.Popen(
        [BIN, "serve", "--tokens", tmp_path / "tokens.toml", "--config", tmp_path / "wasm-agent.toml",
         "--request-state-keys", tmp_path / "keys.toml", "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = server.stderr.readline()
        assert first.startswith("wasm-agent: serving MCP on"), first + server.stderr.read()
    finally:
        server.kill()
        server.wait()
