#!/usr/bin/env bash
# Traces end to end (Tests/tracing/trace_test.py): `pushmedia serve --otel-endpoint` exporting over
# OTLP/HTTP to a receiver on 127.0.0.1 that decodes every export with opentelemetry-proto from
# PyPI. A hook request and a media URL (miss, hit) are each one trace joined to the caller's
# traceparent, with the steps' spans and no secret or query string; a stopped receiver costs
# spans, counted, never a request's time; bad settings stop the start. Python packages are pinned
# in Tests/tracing/requirements.txt and installed into a venv (.build/tools/tracing). Exits 1 when
# a check fails.
#   scripts/tracing.sh                   # BIN=.build/debug/pushmedia
#   scripts/tracing.sh --only hook -v    # arguments go to Tests/tracing/trace_test.py
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/tracing
REQUIREMENTS=Tests/tracing/requirements.txt

. scripts/venv.sh
ensure_venv "$TOOLS" "$REQUIREMENTS"

exec "$TOOLS/bin/python" Tests/tracing/trace_test.py --bin "$BIN" "$@"
