#!/usr/bin/env bash
# Allocations per push of the relays, counted by an LD_PRELOAD (bench/malloc-count.c) in the
# relay process over PUSHES pushes after a warm-up: the APNs campaign path (one rich payload,
# its media cached), distinct bodies, background pushes (byte for byte), and the FCM campaign.
# The relays run as shipped (log level info, a line per push to a file), to HAProxy as sink.
#
#   bench/relay-allocations.sh        PUSHES=50000; BIN=.build-static/stage/pushmedia by default
#
# Writes bench/out/allocations/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/allocations"
PUSHES=${PUSHES:-50000}
BIN=${BIN:-"$ROOT/.build-static/stage/pushmedia"}
SKIP_BUILD=1
source "$BENCH/lib.sh"
source "$BENCH/relay-lib.sh"

# Apple's answer (200, an apns-id, no body) to /3/device/…, Google's ({"name":…}) to the rest.
relay_setup $'status 200 hdr apns-id "%[uuid]" if { path_beg /3/ }\n  http-request return status 200 content-type application/json string "{\\"name\\":\\"projects/b/messages/1\\"}"'
COUNTER="$ROOT/.build-bench/malloc-count.so"
gcc -shared -fPIC -O2 -o "$COUNTER" "$BENCH/malloc-count.c"

python3 - "$ORIGIN" <<'PY'
import json, sys
origin = sys.argv[1]
rich = {"aps": {"alert": {"title": "Weekend sale", "body": "Half price on everything"}, "mutable-content": 1},
        "media_url": f"http://127.0.0.1:{origin}/banner", "campaign": "c-1"}
open("rich.json", "w").write(json.dumps(rich, separators=(",", ":")))
rich["aps"]["alert"]["body"] = "Half price on everything, code @@@@@@@@@@@@@@@@"
open("rich-distinct.json", "w").write(json.dumps(rich, separators=(",", ":")))
open("background.json", "w").write(json.dumps({"aps": {"content-available": 1}, "sync": "inbox"}))
message = {"message": {"token": "device-1", "notification": {"title": "Sale", "body": "Half price",
                                                             "image": f"http://127.0.0.1:{origin}/banner"}}}
open("message.json", "w").write(json.dumps(message, separators=(",", ":")))
PY

# count NAME PID BODY H2LOAD-ARGS...: allocations per push of PID (its counter writes to
# count-PID) over PUSHES pushes.
count() {
  local name=$1 pid=$2 body=$3
  shift 3
  kill -USR2 "$pid"; sleep 0.2
  local before; before=$(cat "count-$pid")
  if [[ $name == distinct ]]; then
    LD_PRELOAD="$DISTINCT_SHIM" h2load -n "$PUSHES" -c 4 -m 32 -t 1 -d "$body" "$@" >"h2load-$name.txt" 2>&1
  else
    h2load -n "$PUSHES" -c 4 -m 32 -t 1 -d "$body" "$@" >"h2load-$name.txt" 2>&1
  fi
  sleep 0.5; kill -USR2 "$pid"; sleep 0.2
  local after ok; after=$(cat "count-$pid")
  ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "h2load-$name.txt")
  python3 -c "print('{\"name\": \"$name\", \"pushes\": $ok, \"allocations_per_push\": %.1f}' % (($after - $before) / max(1, $ok)))" \
    | tee -a counts.jsonl
}

: >counts.jsonl
APNS_ARGS=(-H "authorization: bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJCRU5DSFRFQU0xIn0.c2ln" -H "apns-topic: com.example.bench")
for kind in apns fcm; do
  MALLOC_COUNT_FILE="$OUT/count-$kind" LD_PRELOAD="$COUNTER" start_relay "$kind" "$kind"
  pid=$RELAY_PID
  ln -sf "count-$kind" "count-$pid"
  if [[ $kind == apns ]]; then
    url="https://localhost:$RELAY/3/device/$(printf 'ab%.0s' {1..32})"
    for _ in 1 2 3 4; do
      curl -s --cacert ca.pem --http2 -o /dev/null -X POST "$url" "${APNS_ARGS[@]}" -H "apns-push-type: alert" \
        --data-binary @rich.json; sleep 1
    done
    h2load -n 2000 -c 4 -m 32 -d rich.json "${APNS_ARGS[@]}" -H "apns-push-type: alert" "$url" >/dev/null 2>&1
    count campaign "$pid" rich.json "${APNS_ARGS[@]}" -H "apns-push-type: alert" "$url"
    count distinct "$pid" rich-distinct.json "${APNS_ARGS[@]}" -H "apns-push-type: alert" "$url"
    count passthrough "$pid" background.json "${APNS_ARGS[@]}" -H "apns-push-type: background" "$url"
  else
    url="https://localhost:$RELAY/v1/projects/bench/messages:send"
    FCM_ARGS=(-H "authorization: Bearer bench" -H "content-type: application/json")
    for _ in 1 2 3 4; do
      curl -s --cacert ca.pem --http2 -o /dev/null -X POST "$url" "${FCM_ARGS[@]}" --data-binary @message.json
      sleep 1
    done
    h2load -n 2000 -c 4 -m 32 -d message.json "${FCM_ARGS[@]}" "$url" >/dev/null 2>&1
    count fcm_campaign "$pid" message.json "${FCM_ARGS[@]}" "$url"
  fi
done
python3 - <<'PY'
import json
rows = [json.loads(l) for l in open("counts.jsonl")]
json.dump(rows, open("results.json", "w"), indent=2)
print(f"\n{'':14}{'allocations/push':>18}")
for r in rows:
    print(f"{r['name']:14}{r['allocations_per_push']:>18.1f}")
PY
