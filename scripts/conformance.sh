#!/usr/bin/env bash
# Runs the MCP conformance suite against the conformance server (tests/conformance/server.py):
# through the bridge (the 2025-11-25 suite), and without it (the 2026-07-28 suite); and against
# a 2025-era server (tests/conformance/legacy_server.py, mcp==1.30.0) through the bridge and
# without it (the 2025-11-25 suite). See tests/conformance/run.py for how; failures not listed in
# tests/conformance/baseline.txt fail it.
#
# The Makefile exports NODE22 (a Node.js 22 binary), CONFORMANCE (the stable suite),
# CONFORMANCE_NEXT (the suite that knows 2026-07-28), SUPERGATEWAY and PYTHON (the venv's python);
# LEGACY_PYTHON may name the python of the 2025-era server (default: .venv-legacy/bin/python).
# Arguments are passed on, e.g. `scripts/conformance.sh --only bridge`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
export PYTHON
# Results are in results/conformance/<run>/ (supergateway.log, and suite-N/ with suite.log and results/).
exec timeout --kill-after=30 840 "$PYTHON" tests/conformance/run.py "$@"
