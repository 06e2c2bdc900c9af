#!/usr/bin/env bash
# The APNs relay beside one plain HTTP/2 hop, in one run, h2load and every server on the same
# 2 cores:
#   direct       h2load -> sink: what the load tool and the sink cost alone
#   haproxy      h2load -> HAProxy (TLS and HTTP/2 both sides, no processing) -> sink
#   campaign     h2load -> relay -> sink: one rich payload (its media cached), many device tokens
#   distinct     the same, every push's text different (see below)
#   passthrough  h2load -> relay -> sink: background pushes, forwarded byte for byte
# The sink is HAProxy answering every POST itself (200 and an apns-id), over TLS and HTTP/2.
# h2load sends one body file, so for `distinct` the relay runs with --memo-bytes 0: it keeps
# no ready payloads, and every push is parsed, looked up in the index cache, rewritten and
# serialized again, which is what a new text costs (the media stays cached).
# For each: pushes/s at full load, CPU µs per push of the relay (or of the HAProxy hop) from
# /proc, then latency at half the relay's maximum rate, and the p99 the relay or hop adds to
# `direct` at the same rate. Last, the relay's peak RSS over PUSHES_RSS pushes, and a perf
# profile of the campaign path (PERF=0 skips).
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
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

log "tools and build"
need_apt=()
command -v h2load >/dev/null || need_apt+=(nghttp2-client)
command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]] || need_apt+=(haproxy)
command -v perf >/dev/null || need_apt+=(linux-perf)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia >/dev/null)
fi

rm -rf "$OUT" && mkdir -p "$OUT"
cd "$OUT"

log "certificates"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
  -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
  -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\n" >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
  -extfile ext.cnf 2>/dev/null
cat server.pem server.key >server-haproxy.pem
openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out AuthKey.p8

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SINK=$(free_port)
HOP=$(free_port)
ORIGIN=$(free_port)

cat >haproxy.cfg <<EOF
global
  maxconn 4000
  log stderr format raw local0 emerg
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend sink
  bind 127.0.0.1:$SINK ssl crt $OUT/server-haproxy.pem alpn h2
  http-request return status 200 hdr apns-id "%[uuid]"
frontend hop
  bind 127.0.0.1:$HOP ssl crt $OUT/server-haproxy.pem alpn h2
  default_backend sink
backend sink
  http-reuse always
  server sink 127.0.0.1:$SINK ssl verify required ca-file $OUT/ca.pem alpn h2
EOF
"$HAPROXY" -f haproxy.cfg -db >haproxy.log 2>&1 &
PIDS+=($!)
HAPROXY_PID=$!

mkdir -p media && cp "$ROOT/samples/media/banner.webp" media/banner
(cd media && exec python3 -m http.server "$ORIGIN" --bind 127.0.0.1 >/dev/null 2>&1) &
PIDS+=($!)

start_relay() { # name, extra args...
  local name=$1
  shift
  "$BIN" serve --port 0 --store "$OUT/store-$name" --log-level warning --apns-port 0 \
    --apns-tls-cert server.pem --apns-tls-key server.key --apns-upstream "https://localhost:$SINK" \
    --apns-upstream-ca ca.pem --trust-peer "127.0.0.1:$ORIGIN" "$@" >"relay-$name.out" 2>"relay-$name.err" &
  RELAY_PID=$!
  PIDS+=($RELAY_PID)
  RELAY=""
  for _ in $(seq 100); do
    RELAY=$(sed -n 's|.*APNs relay on https://127.0.0.1:\([0-9]*\).*|\1|p' "relay-$name.out" | head -1)
    [[ -n $RELAY ]] && break
    sleep 0.1
  done
  [[ -n $RELAY ]] || { cat "relay-$name.err" >&2; exit 1; }
}

JWT=$(python3 - <<'EOF'
import base64, json, subprocess, time
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
head = b64(json.dumps({"alg": "ES256", "kid": "BENCHKEY01"}).encode())
claims = b64(json.dumps({"iss": "BENCHTEAM1", "iat": int(time.time())}).encode())
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "AuthKey.p8"], input=f"{head}.{claims}".encode(),
                     capture_output=True, check=True).stdout
# DER ECDSA signature -> raw r||s
def read_int(b, i):
    assert b[i] == 2; n = b[i + 1]; return int.from_bytes(b[i + 2:i + 2 + n], "big"), i + 2 + n
r, i = read_int(der, 2); s, _ = read_int(der, i)
print(f"{head}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}")
EOF
)

python3 - "$ORIGIN" <<'EOF'
import json, random, sys
origin = sys.argv[1]
rich = {"aps": {"alert": {"title": "Weekend sale", "body": "Half price on everything"}, "mutable-content": 1},
        "media_url": f"http://127.0.0.1:{origin}/banner", "campaign": "c-1"}
open("rich.json", "w").write(json.dumps(rich, separators=(",", ":")))
open("background.json", "w").write(json.dumps({"aps": {"content-available": 1}, "sync": "inbox"}))
random.seed(7)
with open("tokens.txt", "w") as f:
    for _ in range(10000): f.write("/3/device/%064x\n" % random.getrandbits(256))
EOF

uris() { sed "s|^|https://localhost:$1|" tokens.txt >"uris-$1.txt"; echo "uris-$1.txt"; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# h2load run: name, port, body, pid whose CPU is counted ("" for none), extra h2load args...
run() {
  local name=$1 port=$2 body=$3 pid=$4
  shift 4
  local type=alert
  [[ $body == background.json ]] && type=background
  local before=0
  [[ -n $pid ]] && before=$(cpu_ticks "$pid")
  h2load -i "$(uris "$port")" -d "$body" -c "$CONNECTIONS" -m "$STREAMS" -t 1 \
    -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: $type" \
    "$@" >"h2load-$name.txt" 2>&1
  local after=0
  [[ -n $pid ]] && after=$(cpu_ticks "$pid")
  local rps ok
  rps=$(sed -n 's/^finished in .*s, \([0-9.]*\) req\/s.*/\1/p' "h2load-$name.txt")
  ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "h2load-$name.txt")
  local cpu_us=""
  if [[ -n $pid ]]; then
    cpu_us=$(python3 -c "print(round(($after - $before) / $TICK * 1e6 / max(1, $ok), 2))")
  fi
  echo "{\"name\":\"$name\",\"pushes_per_s\":$rps,\"ok\":$ok,\"cpu_us_per_push\":${cpu_us:-null}}" >>runs.jsonl
  printf '  %-22s %10s pushes/s  %6s 2xx  %8s µs CPU/push\n' "$name" "$rps" "$ok" "${cpu_us:--}"
}

log "relays"
start_relay campaign
CAMPAIGN_PID=$RELAY_PID
CAMPAIGN=$RELAY
start_relay distinct --memo-bytes 0
DISTINCT_PID=$RELAY_PID
DISTINCT=$RELAY
# Warm the media cache of both relays (the first push fetches and converts).
for port in $CAMPAIGN $DISTINCT; do
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
  run "distinct#$round" "$DISTINCT" rich.json "$DISTINCT_PID" -n "$PUSHES"
  run "passthrough#$round" "$CAMPAIGN" background.json "$CAMPAIGN_PID" -n "$PUSHES"
done

log "latency at half the relay's maximum rate"
HALF=$(python3 -c "
import json
runs=[json.loads(l) for l in open('runs.jsonl')]
best=max(r['pushes_per_s'] for r in runs if r['name'].startswith('campaign'))
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

if [[ ${PERF:-1} != 0 ]] && perf stat -e task-clock true >/dev/null 2>&1; then
  log "perf: the campaign path"
  perf record -g -o perf.data -p "$CAMPAIGN_PID" -- sleep 8 >/dev/null 2>&1 &
  PERF_PID=$!
  sleep 0.5
  run "perf-campaign" "$CAMPAIGN" rich.json "" -n "$PUSHES" >/dev/null
  wait "$PERF_PID" || true
  perf report -i perf.data --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25 >perf-dso.txt || true
  perf report -i perf.data --no-children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' \
    | head -40 >perf-symbols.txt || true
fi

python3 - "$RSS_KB" "$HALF" "$CONNECTIONS" <<'EOF'
import json, sys
rss_kb, half, connections = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
runs = [json.loads(l) for l in open("runs.jsonl")]
def best(prefix):
    rs = [r for r in runs if r["name"].startswith(prefix + "#")]
    return max(rs, key=lambda r: r["pushes_per_s"])
def p(values, q):
    values = sorted(values); return values[min(len(values) - 1, int(q * len(values)))]
def latency(name):
    rows = [l.split("\t") for l in open(f"latency-{name}.tsv") if l.strip()]
    ms = [int(r[2]) / 1000 for r in rows if r[1] == "200"]
    return {"p50_ms": round(p(ms, 0.5), 3), "p99_ms": round(p(ms, 0.99), 3), "n": len(ms)}
result = {name: best(name) for name in ["direct", "haproxy", "campaign", "distinct", "passthrough"]}
hop = result["haproxy"]["pushes_per_s"]
for name in ["campaign", "distinct", "passthrough"]:
    result[name]["vs_haproxy"] = round(result[name]["pushes_per_s"] / hop, 3)
lat = {name: latency(name) for name in ["direct", "haproxy", "campaign"]}
for name in ["haproxy", "campaign"]:
    lat[name]["added_p99_ms"] = round(lat[name]["p99_ms"] - lat["direct"]["p99_ms"], 3)
result["latency_at_half_rate"] = {"rate_per_s": half * connections, **lat}
result["relay_peak_rss_mb"] = round(rss_kb / 1024, 1)
json.dump(result, open("results.json", "w"), indent=2)
print()
print(f"{'':14}{'pushes/s':>12}{'× HAProxy':>11}{'CPU µs/push':>13}")
for name in ["direct", "haproxy", "campaign", "distinct", "passthrough"]:
    r = result[name]
    print(f"{name:14}{r['pushes_per_s']:>12.0f}{r.get('vs_haproxy', 1.0 if name == 'haproxy' else float('nan')):>11.2f}"
          f"{(r['cpu_us_per_push'] or float('nan')):>13.1f}")
print(f"\nat {half * connections} pushes/s: " + ", ".join(
    f"{n} p50 {v['p50_ms']} ms p99 {v['p99_ms']} ms" + (f" (adds {v['added_p99_ms']} ms)" if 'added_p99_ms' in v else "")
    for n, v in lat.items()))
print(f"relay peak RSS: {result['relay_peak_rss_mb']} MB")
EOF
