#!/usr/bin/env bash
# The APNs relay beside one plain HTTP/2 hop, in one run, h2load and every server on the same
# 2 cores:
#   direct       h2load -> sink: what the load tool and the sink cost alone
#   haproxy      h2load -> HAProxy (TLS and HTTP/2 both sides, no processing, its per-request
#                log on: `option httplog` to a file) -> sink
#   campaign     h2load -> relay -> sink: one rich payload (its media cached), many device tokens
#   distinct     the same, every push's text different (see below)
#   passthrough  h2load -> relay -> sink: background pushes, forwarded byte for byte
#   *_warning    campaign and distinct through a relay with --log-level warning (no line per
#                push), for reference
# The sink is HAProxy answering every POST itself (200 and an apns-id), over TLS and HTTP/2.
# The relays run as shipped: default settings, a log line per push written to a file.
# h2load sends one body file; for `distinct` an LD_PRELOAD (bench/h2load-distinct.c) writes a
# counter into the alert text of every body as it is sent, so every push is a new text: parsed,
# looked up in the index cache, rewritten and serialized (the media stays cached).
# For each: pushes/s at full load, CPU µs per push of the relay (or of the HAProxy hop) from
# /proc, then latency at half the relay's maximum rate, and the p99 the relay or hop adds to
# `direct` at the same rate. Last, the relay's peak RSS over PUSHES_RSS pushes, and perf
# profiles of the campaign and distinct paths (PERF=0 skips).
#
#   bench/apns-relay.sh            PUSHES=200000 CONNECTIONS=4 STREAMS=100
#
# Writes bench/out/apns/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/apns"
PUSHES=${PUSHES:-200000}
PUSHES_RSS=${PUSHES_RSS:-200000}
CONNECTIONS=${CONNECTIONS:-4}
STREAMS=${STREAMS:-100}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"
source "$BENCH/relay-lib.sh"

relay_setup 'status 200 hdr apns-id "%[uuid]"'

JWT=$(relay_jwt)

python3 - "$ORIGIN" <<'EOF'
import json, random, sys
origin = sys.argv[1]
rich = {"aps": {"alert": {"title": "Weekend sale", "body": "Half price on everything"}, "mutable-content": 1},
        "media_url": f"http://127.0.0.1:{origin}/banner", "campaign": "c-1"}
open("rich.json", "w").write(json.dumps(rich, separators=(",", ":")))
rich["aps"]["alert"]["body"] = "Half price on everything, code @@@@@@@@@@@@@@@@"
open("rich-distinct.json", "w").write(json.dumps(rich, separators=(",", ":")))
open("background.json", "w").write(json.dumps({"aps": {"content-available": 1}, "sync": "inbox"}))
random.seed(7)
with open("tokens.txt", "w") as f:
    for _ in range(10000): f.write("/3/device/%064x\n" % random.getrandbits(256))
EOF

uris() { sed "s|^|https://localhost:$1|" tokens.txt >"uris-$1.txt"; echo "uris-$1.txt"; }

# h2load run: name, port, body, pid whose CPU is counted ("" for none), extra h2load args...
run() {
  local name=$1 port=$2 body=$3 pid=$4
  shift 4
  local type=alert
  [[ $body == background.json ]] && type=background
  h2load_run "$name" "$pid" pushes -i "$(uris "$port")" -d "$body" -c "$CONNECTIONS" -m "$STREAMS" -t 1 \
    -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: $type" "$@"
}

log "relays"
start_relay apns campaign
CAMPAIGN_PID=$RELAY_PID
CAMPAIGN=$RELAY
start_relay apns distinct
DISTINCT_PID=$RELAY_PID
DISTINCT=$RELAY
start_relay apns warning --log-level warning
WARNING_PID=$RELAY_PID
WARNING=$RELAY
# Warm the media cache of both relays (the first push fetches and converts).
for port in $CAMPAIGN $DISTINCT $WARNING; do
  for _ in 1 2 3 4; do
    curl -s --cacert ca.pem --http2 -o /dev/null -X POST "https://localhost:$port/3/device/$(printf 'ab%.0s' {1..32})" \
      -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert" \
      --data-binary @rich.json
    sleep 1
  done
done

log "full load, $PUSHES pushes each"
: >runs.jsonl
for round in 1 2; do
  run "direct#$round" "$SINK" rich.json "" -n "$PUSHES"
  run "haproxy#$round" "$HOP" rich.json "$HAPROXY_PID" -n "$PUSHES"
  run "campaign#$round" "$CAMPAIGN" rich.json "$CAMPAIGN_PID" -n "$PUSHES"
  run "distinct#$round" "$DISTINCT" rich-distinct.json "$DISTINCT_PID" -n "$PUSHES"
  run "passthrough#$round" "$CAMPAIGN" background.json "$CAMPAIGN_PID" -n "$PUSHES"
  run "campaign_warning#$round" "$WARNING" rich.json "$WARNING_PID" -n "$PUSHES"
  run "distinct_warning#$round" "$WARNING" rich-distinct.json "$WARNING_PID" -n "$PUSHES"
done

log "latency at half the relay's maximum rate"
HALF=$(python3 -c "
import json
runs=[json.loads(l) for l in open('runs.jsonl')]
best=max(r['per_s'] for r in runs if r['name'].startswith('campaign'))
print(max(1, int(best / 2 / $CONNECTIONS)))")
echo "  --rps $HALF per connection × $CONNECTIONS"
LAT_N=$((HALF * CONNECTIONS * 10))
for target in "direct:$SINK" "haproxy:$HOP" "campaign:$CAMPAIGN"; do
  name=${target%%:*}
  port=${target#*:}
  h2load -i "$(uris "$port")" -d rich.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 --rps "$HALF" -n "$LAT_N" \
    -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert" \
    --log-file "latency-$name.tsv" >"h2load-latency-$name.txt" 2>&1
done

log "relay RSS over $PUSHES_RSS pushes (half campaign, half passthrough)"
run "rss-campaign" "$CAMPAIGN" rich.json "$CAMPAIGN_PID" -n $((PUSHES_RSS / 2)) >/dev/null
run "rss-passthrough" "$CAMPAIGN" background.json "$CAMPAIGN_PID" -n $((PUSHES_RSS / 2)) >/dev/null
RSS_KB=$(awk '/VmHWM/ {print $2}' "/proc/$CAMPAIGN_PID/status")

relay_perf campaign "$CAMPAIGN_PID" run "perf-campaign" "$CAMPAIGN" rich.json "" -n "$PUSHES"
relay_perf distinct "$DISTINCT_PID" run "perf-distinct" "$DISTINCT" rich-distinct.json "" -n "$((PUSHES / 4))"

python3 - "$RSS_KB" "$HALF" "$CONNECTIONS" <<'EOF'
import json, sys
rss_kb, half, connections = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
runs = [json.loads(l) for l in open("runs.jsonl")]
def best(prefix):
    rs = [r for r in runs if r["name"].startswith(prefix + "#")]
    return max(rs, key=lambda r: r["per_s"])
def p(values, q):
    values = sorted(values); return values[min(len(values) - 1, int(q * len(values)))]
def latency(name):
    rows = [l.split("\t") for l in open(f"latency-{name}.tsv") if l.strip()]
    ms = [int(r[2]) / 1000 for r in rows if r[1] == "200"]
    return {"p50_ms": round(p(ms, 0.5), 3), "p99_ms": round(p(ms, 0.99), 3), "n": len(ms)}
names = ["direct", "haproxy", "campaign", "distinct", "passthrough", "campaign_warning", "distinct_warning"]
result = {name: best(name) for name in names}
hop = result["haproxy"]["per_s"]
for name in names[2:]:
    result[name]["vs_haproxy"] = round(result[name]["per_s"] / hop, 3)
lat = {name: latency(name) for name in ["direct", "haproxy", "campaign"]}
for name in ["haproxy", "campaign"]:
    lat[name]["added_p99_ms"] = round(lat[name]["p99_ms"] - lat["direct"]["p99_ms"], 3)
result["latency_at_half_rate"] = {"rate_per_s": half * connections, **lat}
result["relay_peak_rss_mb"] = round(rss_kb / 1024, 1)
print()
json.dump(result, open("results.json", "w"), indent=2)
print(f"{'':14}{'pushes/s':>12}{'× HAProxy':>11}{'CPU µs/push':>13}{'sink µs/push':>14}")
for name in names:
    r = result[name]
    own = r["cpu_us"] or float("nan")
    sink = r["sink_cpu_us"]
    print(f"{name:14}{r['per_s']:>12.0f}{r.get('vs_haproxy', 1.0 if name == 'haproxy' else float('nan')):>11.2f}"
          f"{own:>13.1f}{sink:>14.1f}")
print("(every hop and the sink in a process of its own: each one's CPU is its own)")
print(f"\nat {half * connections} pushes/s: " + ", ".join(
    f"{n} p50 {v['p50_ms']} ms p99 {v['p99_ms']} ms" + (f" (adds {v['added_p99_ms']} ms)" if 'added_p99_ms' in v else "")
    for n, v in lat.items()))
print(f"relay peak RSS: {result['relay_peak_rss_mb']} MB")
EOF
