#!/usr/bin/env bash
# The relays under HTTP/2 and TLS attacks, on 127.0.0.1 only (Tests/attack/attack_test.py): one
# `pushmedia serve` with the APNs and FCM relays over TLS, in front of the strict stand-ins for
# Apple and Google. For each relay, each attack of Tests/attack/attacks.py runs for SECONDS
# (default 6) from a subprocess of raw frames (hyperframe's layout, hpack's encoder) while a
# legitimate client sends a push every 50 ms on its own connection: rapid reset
# (CVE-2023-44487), CONTINUATION flood (CVE-2024-27316), an HPACK bomb, PING and SETTINGS
# floods, empty DATA frames (CVE-2019-9518), streams opened and never finished, slow read with a
# window of 0 (CVE-2019-9517), slow TLS handshakes, and HTTP/1.1 headers dribbled (the FCM
# relay's HTTP/1.1, the hook's port). Checked for each: the relay is alive, at most 5 % of the
# legitimate pushes failed and their p99 is under 1 s, RSS grew by at most 100 MB and came back
# within 30 s. Then RFC 9113's protocol errors, frame by frame, on both relays' listeners.
# Python packages come from Tests/apns/requirements.txt (the same venv as scripts/apns-relay.sh).
# Exits 1 when a check fails.
#   scripts/relay-attacks.sh                      # BIN=.build/debug/pushmedia
#   scripts/relay-attacks.sh --only slow_read     # arguments go to Tests/attack/attack_test.py
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/apns
PY=$TOOLS/bin/python

. scripts/venv.sh
ensure_venv "$TOOLS" Tests/apns/requirements.txt
# Hundreds of connections at once: one file descriptor each, in the attacker and the relay.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

exec "$PY" Tests/attack/attack_test.py --bin "$BIN" --seconds "${SECONDS_EACH:-6}" "$@"
