# wasm-agent: set up, demo, test, bench.
CARGO   ?= cargo
# The host's crates (host/*), tested together so their dependencies build once.
HOST_CRATES := wasm-agent-console wasm-agent-redact wasm-agent-relink wasm-agent-policy wasm-agent-session wasm-agent-session-sqlite wasm-agent-session-postgres wasm-agent-cache wasm-agent-cache-redis wasm-agent-access wasm-agent-access-redis wasm-agent-sandbox wasm-agent-pipeline wasm-agent-code-mode wasm-agent-metrics wasm-agent-telemetry \
	wasm-agent-oci wasm-agent-audit wasm-agent-audit-postgres wasm-agent-agent wasm-agent-mcp wasm-agent-mcp-client wasm-agent wasm-agent-cli
GUESTS  := calculator files json fetch weather run_monty fixture-tool echo-tool compat-tool hostile-tool
WASM    := target/wasm32-wasip2/release
BIN     := target/release/wasm-agent
DEMO    := target/demo
VENV    := target/mcp-venv
PYTHON  ?= python3
# Tools in Python (componentize-py) and JavaScript (componentize-qjs; the
# run_javascript interpreter with componentize-js).
POLY    := target/polyglot
PY_VENV := target/py-venv
JS_DEPS := example-tools/mdtable
JS_WIT  := target/wit-run_javascript
JS_TOOL_WIT := target/wit-js-tool
PY_WIT  := target/wit-run_python
WASI_WIT := $(JS_DEPS)/node_modules/@bytecodealliance/jco/lib/wit/builtin/0.2.12
POLYGLOT := $(addprefix $(POLY)/,textstats.wasm fixture-py.wasm mdtable.wasm fixture-js.wasm \
	run_python.wasm run_javascript.wasm)

.PHONY: setup compiled wasm-target host guests polyglot py-toolchain js-toolchain demo test test-servers test-tools test-mcp cli-reference docs-check book mcp-venv mcp-ts bench hot-code soak fuzz lint clean

## Install the wasm32-wasip2 target, build the host (release) and every guest,
## the Python and JavaScript ones included, and compile the example tools into
## the cache, so that the demo and `serve` start without compiling.
setup: wasm-target host guests polyglot compiled

## The example tools (and the interpreters behind run_* and code mode).
EXAMPLES := $(addprefix $(WASM)/,calculator.wasm files.wasm json.wasm fetch.wasm weather.wasm run_monty.wasm) \
	$(addprefix $(POLY)/,textstats.wasm mdtable.wasm run_python.wasm run_javascript.wasm)

compiled: host guests polyglot
	$(BIN) compile $(EXAMPLES)

wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

host:
	$(CARGO) build --release -p wasm-agent-cli

guests: wasm-target
	$(CARGO) build --release --target wasm32-wasip2 $(addprefix -p ,$(GUESTS))

## Python and JavaScript tools: componentize-py in a venv, componentize-qjs
## and componentize-js from npm (versions pinned in guest-sdk/python/requirements.txt and
## example-tools/mdtable/package-lock.json).
polyglot: $(POLYGLOT)

py-toolchain: $(PY_VENV)/.installed

$(PY_VENV)/.installed: guest-sdk/python/requirements.txt
	$(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

js-toolchain: $(JS_DEPS)/node_modules/.installed

$(JS_DEPS)/node_modules/.installed: $(JS_DEPS)/package-lock.json
	npm ci --prefix $(JS_DEPS) --no-audit --no-fund --loglevel=error
	touch $@

PY_SDK := guest-sdk/python/wasm_agent_tool.py guest-sdk/python/wasm_agent_schema.py wit/world.wit
JS_SDK := guest-sdk/js/wasm-agent-tool.js wit/world.wit
# What a JavaScript tool built with componentize-qjs needs.
JS_TOOL := $(JS_SDK) $(JS_TOOL_WIT)/.assembled $(JS_DEPS)/node_modules/.installed

$(POLY)/textstats.wasm: example-tools/textstats/app.py $(PY_SDK) $(PY_VENV)/.installed
	$(call componentize-py,example-tools/textstats)
$(POLY)/fixture-py.wasm: tests/fixture-py/app.py $(PY_SDK) $(PY_VENV)/.installed
	$(call componentize-py,tests/fixture-py)
$(POLY)/run_python.wasm: example-tools/run_python/app.py example-tools/run_python/wasi_fetch.py \
		example-tools/run_python/wasi_requests.py \
		$(PY_SDK) $(PY_VENV)/.installed $(PY_WIT)/.assembled
	@mkdir -p $(POLY)
	$(PY_VENV)/bin/componentize-py -d $(PY_WIT) -w py-interpreter componentize app \
		-p example-tools/run_python -p guest-sdk/python -o $@

# run_python's world: the contract plus wasi:http's outgoing handler for its
# fetch, with the WASI WIT from the pinned jco package.
$(PY_WIT)/.assembled: wit/world.wit example-tools/run_python/interpreter.wit $(JS_DEPS)/node_modules/.installed
	rm -rf $(PY_WIT) && mkdir -p $(PY_WIT)/deps
	cp wit/world.wit example-tools/run_python/interpreter.wit $(PY_WIT)/
	cd $(WASI_WIT) && cp -r wasi-http wasi-io wasi-clocks wasi-cli wasi-random wasi-filesystem \
		wasi-sockets $(CURDIR)/$(PY_WIT)/deps/
	touch $@
$(POLY)/mdtable.wasm: example-tools/mdtable/app.js $(JS_TOOL)
	$(call componentize-qjs,example-tools/mdtable/app.js)
$(POLY)/fixture-js.wasm: tests/fixture-js/app.js $(JS_TOOL)
	$(call componentize-qjs,tests/fixture-js/app.js)
$(POLY)/run_javascript.wasm: example-tools/run_javascript/app.js example-tools/run_javascript/fs.js \
		example-tools/run_javascript/node.js \
		$(JS_SDK) $(JS_WIT)/.assembled
	@mkdir -p $(POLY)
	$(JS_DEPS)/node_modules/.bin/componentize-js --wit $(JS_WIT) --world-name js-interpreter \
		--disable fetch-event -o $@ example-tools/run_javascript/app.js

# run_javascript's world: the contract plus the wasi:filesystem imports its
# `fs` uses (the engine imports them anyway), with their WIT from the pinned
# jco package.
$(JS_WIT)/.assembled: wit/world.wit example-tools/run_javascript/interpreter.wit $(JS_DEPS)/node_modules/.installed
	rm -rf $(JS_WIT) && mkdir -p $(JS_WIT)/deps
	cp wit/world.wit example-tools/run_javascript/interpreter.wit $(JS_WIT)/
	cp -r $(WASI_WIT)/wasi-filesystem $(WASI_WIT)/wasi-io $(WASI_WIT)/wasi-clocks $(WASI_WIT)/wasi-random $(JS_WIT)/deps/
	touch $@

# A JavaScript tool's world (js-toolkit): the contract plus the wasi:random
# the helper seeds Math.random from.
$(JS_TOOL_WIT)/.assembled: wit/world.wit guest-sdk/js/wit/js-tool.wit guest-sdk/js/wit/deps/wasi-random/random.wit
	rm -rf $(JS_TOOL_WIT) && mkdir -p $(JS_TOOL_WIT)
	cp wit/world.wit $(JS_TOOL_WIT)/ && cp -r guest-sdk/js/wit/. $(JS_TOOL_WIT)/
	touch $@

# $(call componentize-py,FOLDER): FOLDER/app.py with the helper -> $@
define componentize-py
	@mkdir -p $(POLY)
	$(PY_VENV)/bin/componentize-py -d wit -w toolkit componentize app -p $(1) -p guest-sdk/python -o $@
endef

# $(call componentize-qjs,FILE): FILE on QuickJS -> $@: a 1.7 MB component
# that starts in microseconds (componentize-js's SpiderMonkey is 12 MB and
# needs ~0.4 ms a call to start). Without an event loop (--sync), so its
# tools answer synchronously. Run from the root: the JavaScript it imports
# must lie under the working directory.
define componentize-qjs
	@mkdir -p $(POLY)
	$(JS_DEPS)/node_modules/.bin/componentize-qjs --sync --wit $(JS_TOOL_WIT) --world js-toolkit --js $(1) -o $@ >/dev/null
endef

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
	@echo; echo "== a Python tool (componentize-py): text_stats =="
	@$(BIN) call $(POLY)/textstats.wasm text_stats '{"text": "Tools run in sandboxes. Sandboxes keep tools honest."}'
	@echo; echo "== a JavaScript tool (componentize-qjs): markdown_table =="
	@$(BIN) call $(POLY)/mdtable.wasm markdown_table '{"rows": [{"tool": "calculate", "ms": 0.03}, {"tool": "text_stats", "ms": 1.2}]}'
	@echo; echo "== run_python: code a model wrote, in the sandbox (files in /scratch come back) =="
	@$(BIN) call $(POLY)/run_python.wasm run_python --scratch \
	  '{"code": "import statistics\nxs = [3, 1, 4, 1, 5, 9, 2, 6]\nopen(\"sorted.txt\", \"w\").write(str(sorted(xs)))\nprint(\"mean\", statistics.mean(xs))\nstatistics.median(xs)"}'
	@echo; echo "== run_javascript (fs sees /scratch and granted folders only) =="
	@$(BIN) call $(POLY)/run_javascript.wasm run_javascript --scratch --allow-dir $(DEMO)/data:/data:ro \
	  '{"code": "const words = fs.readFile(\"/data/notes.txt\").trim().split(\"\\n\");\nfs.writeFile(\"count.json\", JSON.stringify({ words: words.length }));\nconsole.log(words.length, \"words\");\nwords.sort().reverse()"}'
	@echo; echo "== contained: model code that reads /etc/passwd, then loops forever =="
	@$(BIN) call $(POLY)/run_python.wasm run_python '{"code": "open(\"/etc/passwd\").read()"}' || true
	@$(BIN) call $(POLY)/run_javascript.wasm run_javascript '{"code": "while (true) {}"}' --timeout 300ms || true
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

## Run every test (unit and end-to-end) against release builds. The host's
## crates are tested on their own: a workspace-wide build unifies dependency
## features differently (serde_json's preserve_order, ...) and would compile
## wasmtime a second time.
## Then `wasm-agent serve` is driven by the official Python and TypeScript
## MCP SDKs, and the embedders' API documentation must build without warnings.
test: wasm-target guests polyglot mcp-venv mcp-ts test-servers test-tools
	$(CARGO) test --release $(addprefix -p ,$(HOST_CRATES))
	$(CARGO) test --release $(addprefix -p ,wasm-agent-guest $(GUESTS))
	$(VENV)/bin/pytest -p no:cacheprovider -q guest-sdk/python
	node --test guest-sdk/js/test/*.test.js
	$(VENV)/bin/pytest tests/mcp -q
	$(MAKE) docs-check book

## The façade's API documentation (rustdoc, every feature), its warnings
## (broken links among them) errors.
docs-check:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p wasm-agent --no-deps --all-features

## The book (docs/, mdBook) into target/book; the e2e tests docs_links and
## docs_examples check its links and run its console examples.
MDBOOK_VERSION := 0.5.4
MDBOOK := target/tools/mdbook-$(MDBOOK_VERSION)/bin/mdbook

book: $(MDBOOK)
	$(MDBOOK) build docs

$(MDBOOK):
	$(CARGO) install mdbook --version $(MDBOOK_VERSION) --locked --root target/tools/mdbook-$(MDBOOK_VERSION) \
		--no-default-features --features search

## PostgreSQL, Redis, HAProxy and the OCI registry, which the tests start on
## loopback (Debian packages).
test-servers:
	@tests/install-servers.sh

## wkg (a third-party OCI client the registry tests push with), pinned, in
## target/tools unless one is on PATH; a debug build, which compiles faster
## and only pushes a few small blobs.
WKG_VERSION := 0.16.1
test-tools:
	@command -v wkg >/dev/null 2>&1 || test -x target/tools/bin/wkg || \
	  $(CARGO) install --quiet --locked --debug --root target/tools wkg --version $(WKG_VERSION)

## The MCP tests alone (official SDKs against target/release/wasm-agent).
test-mcp: host guests polyglot mcp-venv mcp-ts test-servers
	$(VENV)/bin/pytest tests/mcp -q

## Write the command-line reference (docs/cli/, one page per command) from
## the binary's help; `make test` fails while a page and the binary differ.
cli-reference:
	WASM_AGENT_UPDATE_DOCS=1 $(CARGO) test --release -p wasm-agent-cli --test e2e -- cli_reference

## The official TypeScript MCP SDK, pinned in tests/mcp/ts/package-lock.json.
mcp-ts: tests/mcp/ts/node_modules/.installed

tests/mcp/ts/node_modules/.installed: tests/mcp/ts/package-lock.json
	npm ci --prefix tests/mcp/ts --no-audit --no-fund --loglevel=error
	touch $@

## A Python venv with the pinned MCP SDK and pytest (tests/mcp/requirements.txt).
mcp-venv: $(VENV)/.installed

$(VENV)/.installed: tests/mcp/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt
	touch $@

## Benchmark warm calls, throughput, cold loads, and a Node.js subprocess per
## call; then the MCP server as the official Python SDK sees it over stdio,
## and its own transports against rmcp's with the same server behind them.
## With BASELINE=path/to/wasm-agent (an earlier build), also this build's MCP
## calls and agent-loop turns against that one's, side by side.
bench: setup mcp-venv
	$(CARGO) bench -p wasm-agent-cli --bench calls
	$(CARGO) bench -p wasm-agent-cli --bench code_mode
	$(CARGO) bench -p wasm-agent-pipeline --bench access
	@tests/install-servers.sh
	$(CARGO) bench -p wasm-agent-cli --bench replicas
	@# cargo bench links the binary with its dev-dependencies' features, which
	@# renames the functions hot-code.order lists: serve the one users build.
	$(CARGO) build --release -p wasm-agent-cli
	$(VENV)/bin/python tests/mcp/bench_mcp.py
	$(CARGO) build --release -p wasm-agent-mcp --example rmcp_transports
	$(VENV)/bin/python tests/mcp/bench_transports.py
	@if [ -n "$(BASELINE)" ]; then BASELINE=$(BASELINE) $(VENV)/bin/python tests/mcp/bench_baseline.py; fi

## Rewrite host/cli/hot-code.order, the functions a serving wasm-agent runs,
## which the linker lays out together (a server's RSS: see build.rs). Runs
## servers under `perf` and relinks a few times; needs perf.
hot-code: host guests mcp-venv
	$(VENV)/bin/python tests/mcp/hot_code.py

## `wasm-agent serve` (stdio, then HTTP) through SOAK_CALLS mixed calls
## (ordinary, loops, memory bombs, floods, denials, cancellations, 8
## sessions), sampling RSS and open descriptors; fails on a wrong answer,
## a crash, RSS growth or a descriptor leak. Not part of `make test`.
SOAK_CALLS ?= 100000
soak: host guests mcp-venv
	$(VENV)/bin/python tests/soak/soak.py $(SOAK_CALLS)

## Run every fuzz target for FUZZ_SECONDS each (cargo-fuzz, libFuzzer). Seeds
## are in fuzz/corpus/TARGET; new inputs go to target/fuzz-corpus/TARGET, a
## crash to fuzz/artifacts/TARGET.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := policy_text config arguments provider_answer mcp_messages guest_arguments signed_payload audit_records relink
FUZZ_FLAGS := -s none -O
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && $(CARGO) fuzz build $(FUZZ_FLAGS)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p target/fuzz-corpus/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  (cd fuzz && $(CARGO) fuzz run $(FUZZ_FLAGS) $$t ../target/fuzz-corpus/$$t corpus/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=10 -print_final_stats=1) || exit 1; \
	done

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps $(addprefix -p ,$(HOST_CRATES))
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(GUESTS)) -p wasm-agent-guest --features wasm-agent-guest/http -- -D warnings

clean:
	$(CARGO) clean
