#!/usr/bin/env bash
# The HTTP contract under a property-based tester: Schemathesis (from PyPI, pinned) generates
# requests from /openapi.yaml of a real `pushmedia serve` with default settings (loopback, no
# auth, media URLs on, a fresh local store holding one media file) and checks every answer against the
# document (--checks all). A fixed seed and a bounded number of examples per operation keep the
# run reproducible and about half a minute long. Schemathesis is pinned in
# scripts/schemathesis-requirements.txt and installed into a venv (.build/tools/schemathesis,
# rebuilt when that file changes). Exits 1 when the document and the server disagree. Called
# by `make test` after the Swift tests (which build BIN).
#   scripts/api-conformance.sh                    # BIN=.build/debug/pushmedia
#   SEED=7 EXAMPLES=200 scripts/api-conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
SEED=${SEED:-20261123}
EXAMPLES=${EXAMPLES:-25}
TOOLS=.build/tools/schemathesis
REQUIREMENTS=scripts/schemathesis-requirements.txt
VERSION=$(sed -n 's/^schemathesis==//p' "$REQUIREMENTS")
ST=$TOOLS/bin/st

[ -x "$BIN" ] || { echo "api-conformance: $BIN is missing (swift build first)" >&2; exit 1; }
. scripts/venv.sh
ensure_venv "$TOOLS" "$REQUIREMENTS"

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# One stored file, named by its SHA-256 as the store names everything.
mkdir -p "$work/store"
sample=samples/media/logo-alpha.png
name=$(sha256sum "$sample" | cut -c1-64).png
cp "$sample" "$work/store/$name"

# Media URLs on: signed ones with a test key, unsigned ones for a source prefix nothing listens on.
env -u PUSHMEDIA_TOKEN -u PUSHMEDIA_HMAC_SECRET "$BIN" serve --port 0 --store "$work/store" \
  --url-key 943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881 \
  --url-salt 520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5 \
  --url-allow-source http://127.0.0.1:9/ --url-budget 2s >"$work/serve.out" 2>"$work/serve.err" &
server=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/serve.out" | head -1)
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "api-conformance: pushmedia serve did not start:" >&2; cat "$work/serve.err" >&2; exit 1; }

echo "api-conformance: schemathesis $VERSION on http://127.0.0.1:$port/openapi.yaml (seed $SEED, $EXAMPLES examples per operation)"
# From the work folder: Schemathesis keeps a cache (.schemathesis/) in its current directory.
config=$PWD/scripts/schemathesis.toml
st=$PWD/$ST
cd "$work"
PUSHMEDIA_MEDIA_NAME=$name "$st" --config-file "$config" run "http://127.0.0.1:$port/openapi.yaml" \
  --checks all --seed "$SEED" --max-examples "$EXAMPLES" --workers 1 --no-color \
  --generation-database none --request-timeout 60 --report-dir "$work/report"
