#!/usr/bin/env bash
# Runs the MCP conformance suite against the conformance server (tests/conformance/server.py):
# through the bridge (the 2025-11-25 suite), and without it (the 2026-07-28 suite). See
# tests/conformance/run.py for how; failures not listed in tests/conformance/baseline.txt fail it.
#
# The Makefile exports NODE22 (a Node.js 22 binary), CONFORMANCE (the stable suite),
# CONFORMANCE_NEXT (the suite that knows 2026-07-28), SUPERGATEWAY and PYTHON (the venv's python).
# Arguments are passed on, e.g. `scripts/conformance.sh --only bridge`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
export PYTHON
# Results are in results/conformance/<run>/ (suite-N.log, supergateway.log, results/).
exec timeout --kill-after=30 600 "$PYTHON" tests/conformance/run.py "$@"
