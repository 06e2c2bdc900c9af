#!/usr/bin/env bash
# The relays under attack beside HAProxy 2.6 (Debian's) under the same attacks: the attack suite
# of make test (Tests/attack/attack_test.py, the attacks of Tests/attack/attacks.py) run twice,
# against the release build's `pushmedia serve` (APNs and FCM relays over TLS) and against
# HAProxy in their place (TLS and HTTP/2 frontends passing to the same stand-ins over TLS and
# HTTP/2; a cleartext HTTP/1.1 frontend takes the slow HTTP/1.1 heads the hook's port takes),
# each attack SECONDS_EACH long (default 8) while a legitimate client pushes every 50 ms.
# Per attack and target: RSS before, at its peak and after (MB), CPU seconds used during the
# attack, legitimate pushes failed and their p99.
#
#   bench/relay-attacks.sh            SECONDS_EACH=8 SKIP_BUILD=1 ONLY=slow_read
#
# Writes bench/out/attacks/{pushmedia,haproxy}.json and prints a table (markdown).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/attacks"
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
SECONDS_EACH=${SECONDS_EACH:-8}
source "$BENCH/lib.sh"

command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]] || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
}
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  log "release build"
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia >/dev/null)
fi
cd "$ROOT"
. scripts/venv.sh
ensure_venv .build/tools/apns Tests/apns/requirements.txt
PY=.build/tools/apns/bin/python
ulimit -n 65536 2>/dev/null || true
mkdir -p "$OUT"
only=()
[[ -n ${ONLY:-} ]] && only=(--only "$ONLY")

log "pushmedia $("$BIN" --version 2>/dev/null || echo)"
"$PY" Tests/attack/attack_test.py --bin "$BIN" --seconds "$SECONDS_EACH" --no-conformance \
  --json "$OUT/pushmedia.json" "${only[@]}" || true
log "$("$HAPROXY" -v | head -1)"
"$PY" Tests/attack/attack_test.py --haproxy "$HAPROXY" --seconds "$SECONDS_EACH" \
  --json "$OUT/haproxy.json" "${only[@]}" || true

"$PY" - "$OUT/pushmedia.json" "$OUT/haproxy.json" <<'PY'
import json, sys
ours = {(r["target"], r["attack"]): r for r in json.load(open(sys.argv[1]))}
theirs = {(r["target"].removeprefix("haproxy_"), r["attack"]): r for r in json.load(open(sys.argv[2]))}
def cells(r):
    if r is None:
        return ["", "", "", ""]
    after = r["rss_after_mb"]
    return [f'{r["rss_before_mb"]:.0f} / {r["rss_peak_mb"]:.0f} / {after:.0f}' if after is not None else "died",
            f'{r["cpu_s"]:.2f}' if r["cpu_s"] is not None else "",
            f'{r["legit_failed"]}/{r["legit_sent"]}', f'{r["legit_p99_ms"]:.0f}']
print("| relay | attack | PushMedia RSS MB before / peak / after | CPU s | legit failed | p99 ms "
      "| HAProxy RSS MB before / peak / after | CPU s | legit failed | p99 ms |")
print("|---|---|---|---:|---:|---:|---|---:|---:|---:|")
for key in ours:
    print("| " + " | ".join([key[0], key[1].replace("_", " ")] + cells(ours[key]) + cells(theirs.get(key))) + " |")
PY
