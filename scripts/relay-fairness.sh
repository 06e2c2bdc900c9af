#!/usr/bin/env bash
# The relays' fair shares toward the upstream (Tests/fairness/fairness_test.py), measured as
# shipped: the release binary of scripts/release-static.sh and a fast stand-in for Apple and
# Google (Tests/RelayStandin, SwiftNIO's HTTP/2, every answer held 20 ms, 100 streams a
# connection), built in release beside it; h2load (Debian's nghttp2-client) sends. A light flow
# (a push every 50 ms) beside a heavy one (30,000 pushes, 1,000 in flight; another app, another
# connection of the same app, lower priority, 500 HTTP/1.1 connections, the attack suite's slow
# read) keeps its p99 within twice its p99 alone plus one upstream hold (20 ms). About a minute.
#   scripts/relay-fairness.sh                      # after scripts/release-static.sh
#   scripts/relay-fairness.sh --only apns_apps     # arguments go to Tests/fairness/fairness_test.py
set -euo pipefail
cd "$(dirname "$0")/.."

SCRATCH=${PUSHMEDIA_STATIC_BUILD:-.build-static}
BIN=${BIN:-$SCRATCH/stage/pushmedia}
TOOLS=.build/tools/apns
PY=$TOOLS/bin/python

. scripts/venv.sh
ensure_venv "$TOOLS" Tests/apns/requirements.txt
command -v h2load >/dev/null || { echo "relay-fairness: h2load is missing (Debian: nghttp2-client)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "relay-fairness: $BIN is missing: run scripts/release-static.sh first" >&2; exit 1; }
STANDIN=$(PUSHMEDIA_STATIC_BUILD=$SCRATCH scripts/release-static.sh --product relay-standin)
# Hundreds of connections at once: one file descriptor each.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

exec "$PY" Tests/fairness/fairness_test.py --bin "$BIN" --standin "$STANDIN" "$@"
