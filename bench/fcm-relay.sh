#!/usr/bin/env bash
# The FCM relay beside one plain HTTP/2 hop, in one run, h2load and every server on the same
# 2 cores (TLS and HTTP/2 on every hop):
#   direct       h2load -> sink: what the load tool and the sink cost alone
#   haproxy      h2load -> HAProxy (no processing, its per-request log on: `option httplog` to a
#                file) -> sink
#   campaign     h2load -> FCM relay -> sink: one message with an image (cached), the Android and
#                iOS parts rewritten, answered from the memo keyed on the message without its
#                token (h2load sends one body file: the same token each time; the relay's work
#                does not depend on it); the relay as shipped, a log line per message written to
#                a file
#   campaign_warning  the same through a relay with --log-level warning, for reference
# The sink is HAProxy answering every POST itself (200 and a message name).
# For each: messages/s at full load and CPU µs per message of the relay or the HAProxy hop.
#
#   bench/fcm-relay.sh            MESSAGES=100000 CONNECTIONS=4 STREAMS=100
#
# Writes bench/out/fcm/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/fcm"
PUSHES=${MESSAGES:-100000}
CONNECTIONS=${CONNECTIONS:-4}
STREAMS=${STREAMS:-100}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"
source "$BENCH/relay-lib.sh"

relay_setup 'status 200 content-type application/json string "{\"name\":\"projects/bench/messages/1\"}"'

relay_fcm_message

# h2load run: name, port, pid whose CPU is counted ("" for none)
run() {
  h2load_run "$1" "$3" messages "https://localhost:$2$SEND" -d message.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 \
    -n "$PUSHES" -H "authorization: Bearer bench-oauth-token" -H "content-type: application/json"
}

log "relay"
start_relay fcm campaign
CAMPAIGN_PID=$RELAY_PID
CAMPAIGN=$RELAY
start_relay fcm warning --log-level warning
WARNING_PID=$RELAY_PID
WARNING=$RELAY
# Warm the media cache and the memo (the first message fetches and converts).
for port in $CAMPAIGN $WARNING; do
  for _ in 1 2 3 4; do
    curl -s --cacert ca.pem --http2 -o /dev/null -X POST "https://localhost:$port$SEND" \
      -H "authorization: Bearer bench-oauth-token" -H "content-type: application/json" --data-binary @message.json
    sleep 1
  done
done

log "full load, $PUSHES messages each"
: >runs.jsonl
for round in 1 2; do
  run "direct#$round" "$SINK" ""
  run "haproxy#$round" "$HOP" "$HAPROXY_PID"
  run "campaign#$round" "$CAMPAIGN" "$CAMPAIGN_PID"
  run "campaign_warning#$round" "$WARNING" "$WARNING_PID"
done

relay_perf campaign "$CAMPAIGN_PID" run "perf-campaign" "$CAMPAIGN" ""

python3 - <<'PY'
import json
runs = [json.loads(l) for l in open("runs.jsonl")]
best = {n: max((r for r in runs if r["name"].startswith(n + "#")), key=lambda r: r["per_s"])
        for n in ["direct", "haproxy", "campaign", "campaign_warning"]}
for n in ["campaign", "campaign_warning"]:
    best[n]["vs_haproxy"] = round(best[n]["per_s"] / best["haproxy"]["per_s"], 3)
json.dump(best, open("results.json", "w"), indent=2)
print(f"\n{'':18}{'messages/s':>12}{'× HAProxy':>11}{'CPU µs/message':>16}{'sink µs':>9}")
for n in ["direct", "haproxy", "campaign", "campaign_warning"]:
    r = best[n]
    ratio = r.get("vs_haproxy", 1.0 if n == "haproxy" else float("nan"))
    own = r["cpu_us"] or float("nan")
    sink = r["sink_cpu_us"]
    print(f"{n:18}{r['per_s']:>12.0f}{ratio:>11.2f}{own:>16.1f}{sink:>9.1f}")
print("(every hop and the sink in a process of its own: each one's CPU is its own)")
PY
