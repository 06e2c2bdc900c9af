#!/usr/bin/env bash
# The APNs relay (`pushmedia serve --apns-port`) end to end, on 127.0.0.1 only: a strict stand-in
# for Apple's provider API (Tests/apns/standin.py: HTTP/2 over TLS, ES256 provider tokens, Apple's
# status codes and reasons) takes the place of Apple, and real, unmodified APNs clients from PyPI
# (aioapns over TLS without ALPN, pyapns_client over httpx with ALPN h2), a raw h2 client and
# h2load push through the relay. Checked: the stand-in itself against both clients; a rich push
# arrives upstream with its text intact and its media URL on the relay's store (a JPEG), a
# background push byte for byte, 410 Unregistered with its timestamp back to the client; the
# relay's own provider key (one token for 50 pushes); 503 ServiceUnavailable when the upstream is
# down or stalls, /healthz still 200; a 10,000-push campaign with one origin fetch; hostile media
# URLs refused with the text still delivered; 405/404 answered without reaching upstream; a 1 MiB
# body answered 413 while it is still being sent, the connection going on; GOAWAY
# from upstream retried on a new connection; --apns-allow-team and client certificates keep
# others out; SIGTERM lets a push in flight finish, then exits 0. Held credentials
# (--relay-credentials): the stand-in's certificate auth (a test Apple CA: topics from UID and
# Apple's extension, MissingTopic, TopicDisallowed, BadCertificateEnvironment, BadCertificate);
# aioapns and pyapns_client without valid keys through a relay holding three apps of two teams
# (two .p8 keys, a Keychain-style RC2-40 .p12), each push under its app's credential; aioapns as
# a certificate sender with its own Apple certificate; check-credentials and serve refusing bad
# files by entry; a campaign across SIGHUP reloads (app added, key rotated, app removed, broken
# file) with no push lost or misattributed. openssl (Debian's) makes the legacy .p12. Python packages are pinned in
# Tests/apns/requirements.txt and installed into a venv (.build/tools/apns, rebuilt when that file
# changes); h2load comes from Debian's nghttp2-client, node (for the Node.js sender of docs/relays.md,
# Tests/apns/node-sender.js) from its nodejs. Exits 1 when a check fails.
#   scripts/apns-relay.sh                          # BIN=.build/debug/pushmedia
#   scripts/apns-relay.sh --only campaign -v       # arguments go to Tests/apns/relay_test.py
#   scripts/apns-relay.sh --standin-only           # the stand-in's own checks, no relay needed
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/apns
REQUIREMENTS=Tests/apns/requirements.txt
PY=$TOOLS/bin/python

. scripts/venv.sh
ensure_venv "$TOOLS" "$REQUIREMENTS"

# h2load (Debian's nghttp2-client) and Node.js (the sender of docs/relays.md) when missing.
packages=()
command -v h2load >/dev/null || packages+=(nghttp2-client)
command -v node >/dev/null || command -v nodejs >/dev/null || packages+=(nodejs)
command -v openssl >/dev/null || packages+=(openssl)
if ((${#packages[@]})) && command -v apt-get >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "apns-relay: installing ${packages[*]}" >&2
  install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null; }
  install || { $SUDO apt-get update -qq >/dev/null && install; }
fi
command -v h2load >/dev/null || { echo "apns-relay: h2load is missing (Debian: nghttp2-client)" >&2; exit 1; }
command -v node >/dev/null || command -v nodejs >/dev/null || { echo "apns-relay: node is missing (Debian: nodejs)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "apns-relay: openssl is missing (Debian: openssl)" >&2; exit 1; }

exec "$PY" Tests/apns/relay_test.py --bin "$BIN" "$@"
