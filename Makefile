# wasm-agent: set up, demo, test, bench.
CARGO   ?= cargo
GUESTS  := calculator files json fetch weather fixture-tool echo-tool compat-tool
WASM    := target/wasm32-wasip2/release
BIN     := target/release/wasm-agent
DEMO    := target/demo
VENV    := target/mcp-venv
PYTHON  ?= python3

.PHONY: setup wasm-target host guests demo test test-mcp mcp-venv bench lint clean

## Install the wasm32-wasip2 target, build the host (release) and every guest.
setup: wasm-target host guests

wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

host:
	$(CARGO) build --release -p wasm-agent

guests: wasm-target
	$(CARGO) build --release --target wasm32-wasip2 $(addprefix -p ,$(GUESTS))

## List the example tools, make a few calls, and show denied ones.
demo: setup
	@rm -rf $(DEMO) && mkdir -p $(DEMO)/data && printf 'alpha\nbeta\ngamma\n' > $(DEMO)/data/notes.txt
	@echo "== tools =="
	@$(BIN) tools $(WASM)/calculator.wasm $(WASM)/files.wasm $(WASM)/json.wasm
	@echo; echo "== calculate 2 * (3 + 4) ^ 2 =="
	@$(BIN) call $(WASM)/calculator.wasm calculate '{"expression": "2 * (3 + 4) ^ 2"}'
	@echo; echo "== search the granted folder (read-only) =="
	@$(BIN) call $(WASM)/files.wasm search '{"path": "/data", "pattern": "beta"}' --allow-dir $(DEMO)/data:/data:ro
	@echo; echo "== json_query =="
	@$(BIN) call $(WASM)/json.wasm json_query '{"document": "{\"users\": [{\"name\": \"ada\"}]}", "path": "users[0].name"}'
	@echo; echo "== denied: write into a read-only grant =="
	@$(BIN) call $(WASM)/files.wasm write_file '{"path": "/data/x.txt", "content": "x"}' --allow-dir $(DEMO)/data:/data:ro || true
	@echo; echo "== denied: read outside every grant =="
	@$(BIN) call $(WASM)/files.wasm read_file '{"path": "/etc/passwd"}' --allow-dir $(DEMO)/data:/data:ro || true
	@echo; echo "== denied: invalid arguments =="
	@$(BIN) call $(WASM)/calculator.wasm calculate '{"expr": "1"}' || true
	@echo; echo "== stopped: an endless loop under --timeout 300ms =="
	@$(BIN) call $(WASM)/fixture_tool.wasm spin --timeout 300ms || true
	@echo; echo "== stopped: endless allocation under --memory 16MiB =="
	@$(BIN) call $(WASM)/fixture_tool.wasm alloc --memory 16MiB || true
	@echo; echo "== denied: fetch a host the policy does not grant =="
	@$(BIN) call $(WASM)/fetch.wasm fetch '{"url": "http://example.com/"}' || true
	@echo; echo "== denied: the cloud metadata address, even with every http host granted =="
	@$(BIN) call $(WASM)/fetch.wasm fetch '{"url": "http://169.254.169.254/latest/meta-data/"}' --allow-host 'http://*:80' || true
	@echo; echo "== denied: raw TCP =="
	@$(BIN) call $(WASM)/fixture_tool.wasm tcp_connect '{"addr": "127.0.0.1:9"}' || true

## Run every test (unit and end-to-end) against release builds. The host is
## tested on its own: a workspace-wide build unifies dependency features
## differently (serde_json's preserve_order, ...) and would compile wasmtime
## a second time.
## Then `wasm-agent serve` is driven by the official Python MCP SDK.
test: wasm-target guests mcp-venv
	$(CARGO) test --release -p wasm-agent
	$(CARGO) test --release $(addprefix -p ,wasm-agent-guest $(GUESTS))
	$(VENV)/bin/pytest tests/mcp -q

## The MCP tests alone (official Python SDK against target/release/wasm-agent).
test-mcp: host guests mcp-venv
	$(VENV)/bin/pytest tests/mcp -q

## A Python venv with the pinned MCP SDK and pytest (tests/mcp/requirements.txt).
mcp-venv: $(VENV)/.installed

$(VENV)/.installed: tests/mcp/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt
	touch $@

## Benchmark warm calls, throughput, cold loads, and a Node.js subprocess per call.
bench: setup
	$(CARGO) bench -p wasm-agent --bench calls

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(GUESTS)) -p wasm-agent-guest --features wasm-agent-guest/http -- -D warnings

clean:
	$(CARGO) clean
