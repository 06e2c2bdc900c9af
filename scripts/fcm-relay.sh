#!/usr/bin/env bash
# The FCM relay (`pushmedia serve --fcm-port`) end to end, on 127.0.0.1 only: a strict stand-in
# for Firebase Cloud Messaging's HTTP v1 API (Tests/fcm/standin.py: HTTP/2 or HTTP/1.1 over TLS,
# OAuth bearer tokens, projects, Google's JSON errors with FcmError codes, an OAuth token
# endpoint) takes the place of Google, and real, unmodified FCM clients from PyPI
# (firebase-admin over requests, async-firebase over httpx with HTTP/2) and raw HTTP requests go
# through the relay. Checked: the stand-in itself against both clients; a rich message arrives
# upstream with its text, data and Android options intact, its images (android.notification.image,
# apns.fcm_options.image) on the relay's store (JPEGs) and mutable-content set; the client gets
# the stand-in's message name; UNREGISTERED surfaces as each library's UnregisteredError;
# without a certificate HTTP/1.1 and h2c on one port; validate_only arrives byte for byte; 503
# UNAVAILABLE when the upstream is down, /healthz still 200; 404/405 answered without reaching
# upstream; a 300-message campaign with one origin fetch; held service accounts
# (--relay-credentials): firebase-admin and httpx without credentials of their own send to two
# projects, each message with an access token the stand-in issued for its project after one
# verified RS256 assertion per account, and a project with no entry refused.
# Python packages are pinned in Tests/fcm/requirements.txt and installed into a venv
# (.build/tools/fcm, rebuilt when that file changes). Exits 1 when a check fails.
#   scripts/fcm-relay.sh                          # BIN=.build/debug/pushmedia
#   scripts/fcm-relay.sh --only campaign -v       # arguments go to Tests/fcm/relay_test.py
#   scripts/fcm-relay.sh --standin-only           # the stand-in's own checks, no relay needed
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/fcm
REQUIREMENTS=Tests/fcm/requirements.txt
PY=$TOOLS/bin/python

. scripts/venv.sh
ensure_venv "$TOOLS" "$REQUIREMENTS"

exec "$PY" Tests/fcm/relay_test.py --bin "$BIN" "$@"
