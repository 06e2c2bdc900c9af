#!/usr/bin/env bash
# What traces cost, on four paths, in one run, every server on the same 2 cores:
#   before       `pushmedia serve` built before traces existed (BEFORE=<binary>; without it,
#                this build with no --otel-endpoint, the same as `off`)
#   off          this build, no --otel-endpoint (as shipped)
#   sampled      --otel-endpoint, --otel-sampler parentbased_traceidratio --otel-sampler-arg RATIO
#                (default 0.1)
#   sampled_100  --otel-endpoint: every request traced and exported (the default sampler; the
#                load carries no traceparent)
# The spans the sink received during each traced pass, per request, are printed beside the
# ratios: an exporter that drops spans is not cheaper, it is broken.
# Each runs as shipped otherwise: default settings, a log line per request or push written to
# a file. Each is one process with the hook, media URLs and both relays; the spans go to an
# OTLP/HTTP sink in a process of its own (bench/otlp_sink.py: it decodes every export with
# opentelemetry-proto), the pushes and messages to HAProxy answering as APNs and as FCM
# (bench/relay-lib.sh).
# The paths:
#   process      wrk POSTs /v1/process payloads whose media is cached (bench/wrk_process.lua, hit)
#   media_url    wrk GETs one cached media URL (unsigned, an allow-listed source)
#   apns         h2load pushes one rich campaign payload (its media cached) to many device tokens
#   fcm          h2load sends one FCM message with an image (cached) through the FCM relay
# The server's CPU per request from /proc, ROUNDS rounds, the order reversed every other one;
# each ratio is to `before` in the same round, and the table gives the median of the rounds
# (without BEFORE, a second table gives them to the mean of `before` and `off`, the same build).
#
#   BEFORE=/path/to/old/pushmedia bench/tracing.sh      SECONDS_EACH=10 PUSHES=50000 ROUNDS=2 RATIO=0.1
#
# PATHS="apns fcm" measures those paths only (default: all four). RATE=N sends the pushes and
# messages at N a second (h2load --rps), below what every server can take, instead of as fast as
# the server answers: each server then handles the same load, and its CPU per push does not
# include the cost of answering in smaller batches when it is slower. GAP_MS=N does the same
# for the hook's wrk passes: each of the 32 connections waits N ms between an answer and its
# next request (about 32 × 1000 / (N + latency) a second). URL_RATE=N GETs the media URL at N a
# second (h2load over HTTP/1.1, 24 clients, --rps), instead of with wrk's closed loop (or GAP_MS).
#
# COUNT=instructions counts instructions instead of CPU time, where a machine's noise hides a few
# per cent: `off`, `sampled` and `sampled_100` (no `before`) each run under valgrind's callgrind,
# and each path's requests (wrk for IR_SECONDS on the hook, IR_N requests on the others; 4
# connections, no pacing) are counted in user space to the last span the sink received of them,
# IR_ROUNDS times (bench/out/tracing/ir.jsonl, a table). callgrind runs a program tens of times
# slower: the traced servers' exporter waits IR_DELAY_MS (--otel-schedule-delay, 15000) instead
# of half a second, so that it sends batches of 512 spans as it does at full speed, and not a
# post per few spans. Each server's threads are counted apart (--separate-threads): after a
# traced pass, only the exporter's thread counts while it sends the pass's last spans. Every
# server reads its store's index again only once an hour (--index-cache-ttl 1h, all three
# alike; `ir_pass` says why), and the sink keeps the relays' connections open for an hour
# (SINK_IDLE) rather than a minute: a server that waited longer between two passes than another
# would otherwise open a new one inside its pass, 4 million instructions of TLS handshake that
# `off`'s pass did not run. What callgrind does not count: the kernel's work (sockets, the
# exporter's posts and wake-ups), cache misses.
#
# Writes bench/out/tracing/results.json and the profiles, and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/tracing"
SECONDS_EACH=${SECONDS_EACH:-10}
PUSHES=${PUSHES:-50000}
ROUNDS=${ROUNDS:-2}
CONNECTIONS=${CONNECTIONS:-4}
STREAMS=${STREAMS:-100}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
BEFORE=${BEFORE:-$BIN}
RATIO=${RATIO:-0.1}
PATHS=${PATHS:-process media_url apns fcm}
RATE=${RATE:-}
PACE=()
[[ -n $RATE ]] && PACE=(--rps "$((RATE / CONNECTIONS))")
GAP_MS=${GAP_MS:-0}
URL_RATE=${URL_RATE:-}
URL_CLIENTS=24
COUNT=${COUNT:-cpu}
[[ $COUNT == cpu || $COUNT == instructions ]] || { echo "COUNT is cpu or instructions" >&2; exit 64; }
source "$BENCH/lib.sh"
source "$BENCH/relay-lib.sh"
TOOLS=(wrk)
[[ $COUNT == instructions ]] && TOOLS+=(valgrind) && SINK_IDLE=1h
for tool in "${TOOLS[@]}"; do
  command -v "$tool" >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null; }
done
NEW_BIN=$BIN

# One sink for both relays: FCM's answer to its send path, APNs' to every other request.
relay_setup 'status 200 content-type application/json string "{\"name\":\"projects/bench/messages/1\"}" if { path_beg /v1/projects/ }
  http-request return status 200 hdr apns-id "%[uuid]"'
. "$ROOT/scripts/venv.sh"
ensure_venv "$ROOT/.build/tools/tracing" "$ROOT/Tests/tracing/requirements.txt"
SINK_OTLP=$(free_port)
"$ROOT/.build/tools/tracing/bin/python" "$BENCH/otlp_sink.py" "$SINK_OTLP" "$PWD/sink.count" >otlp-sink.out 2>otlp-sink.log &
OTLP_PID=$!
PIDS+=($OTLP_PID)
for _ in $(seq 100); do grep -q '^otlp sink on' otlp-sink.out && break; sleep 0.1; done
grep -q '^otlp sink on' otlp-sink.out || die "the OTLP sink did not start: $(cat otlp-sink.log)"

JWT=$(relay_jwt)
python3 - "$ORIGIN" <<'EOF'
import json, random, sys
origin = sys.argv[1]
rich = {"aps": {"alert": {"title": "Weekend sale", "body": "Half price on everything"}, "mutable-content": 1},
        "media_url": f"http://127.0.0.1:{origin}/banner", "campaign": "c-1"}
open("rich.json", "w").write(json.dumps(rich, separators=(",", ":")))
random.seed(7)
with open("tokens.txt", "w") as f:
    for _ in range(10000): f.write("/3/device/%064x\n" % random.getrandbits(256))
open("urls.txt", "w").write(f"http://127.0.0.1:{origin}/banner\n")
EOF
relay_fcm_message
MEDIA_URL_PATH="/insecure/pr:ios/plain/http://127.0.0.1:$ORIGIN/banner@jpg"

log "servers"
declare -A PID_OF HOOK_OF RELAY_OF FCM_OF
NAMES=(before off sampled sampled_100)
if [[ $COUNT == instructions ]]; then
  NAMES=(off sampled sampled_100)
  # A server starts in about a minute under callgrind.
  RELAY_START_TRIES=1800
  IR_DELAY_MS=${IR_DELAY_MS:-15000}
fi
for name in "${NAMES[@]}"; do
  extra=(--url-allow-source "http://127.0.0.1:$ORIGIN/")
  if [[ $COUNT == instructions ]]; then
    RELAY_WRAP=(valgrind -q --tool=callgrind --separate-threads=yes "--callgrind-out-file=$OUT/callgrind-$name")
    extra+=(--otel-schedule-delay "$IR_DELAY_MS" --index-cache-ttl 1h)
  fi
  case $name in
    before) BIN=$BEFORE ;;
    off) BIN=$NEW_BIN ;;
    sampled) BIN=$NEW_BIN
      extra+=(--otel-endpoint "http://127.0.0.1:$SINK_OTLP" --otel-sampler parentbased_traceidratio
              --otel-sampler-arg "$RATIO") ;;
    sampled_100) BIN=$NEW_BIN; extra+=(--otel-endpoint "http://127.0.0.1:$SINK_OTLP") ;;
  esac
  start_relay apns "$name" "${extra[@]}" --fcm-port 0 --fcm-tls-cert server.pem --fcm-tls-key server.key \
    --fcm-upstream "https://localhost:$SINK" --fcm-upstream-ca ca.pem
  PID_OF[$name]=$RELAY_PID
  RELAY_OF[$name]=$RELAY
  for _ in $(seq "${RELAY_START_TRIES:-100}"); do
    HOOK_OF[$name]=$(sed -n 's|^PushMedia listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "relay-$name.out" | head -1)
    FCM_OF[$name]=$(sed -n 's|.*FCM relay on https://127.0.0.1:\([0-9]*\).*|\1|p' "relay-$name.out" | head -1)
    [[ -n ${HOOK_OF[$name]} && -n ${FCM_OF[$name]} ]] && break
    sleep 0.1
  done
  [[ -n ${HOOK_OF[$name]} ]] || die "$name: no hook port"
  [[ -n ${FCM_OF[$name]} ]] || die "$name: no FCM relay port"
done
BIN=$NEW_BIN

# warm_paths NAME: one request of each path to NAME's server (a hook payload, the media URL, an
# APNs push, an FCM message), each as the passes send it.
warm_paths() {
  local name=$1
  curl -s -o /dev/null -X POST "http://127.0.0.1:${HOOK_OF[$name]}/v1/process" \
    -H 'Content-Type: application/json' --data-binary @rich.json
  curl -s -o /dev/null "http://127.0.0.1:${HOOK_OF[$name]}$MEDIA_URL_PATH"
  curl -s --cacert ca.pem --http2 -o /dev/null -X POST \
    "https://localhost:${RELAY_OF[$name]}/3/device/$(printf 'ab%.0s' {1..32})" \
    -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert" \
    --data-binary @rich.json
  curl -s --cacert ca.pem --http2 -o /dev/null -X POST "https://localhost:${FCM_OF[$name]}$SEND" \
    -H "authorization: Bearer bench-oauth-token" -H "content-type: application/json" --data-binary @message.json
}

log "warm every cache"
for name in "${NAMES[@]}"; do
  for _ in 1 2 3; do
    warm_paths "$name"
    sleep 1
  done
  outcome=$(curl -s -D - -o /dev/null "http://127.0.0.1:${HOOK_OF[$name]}$MEDIA_URL_PATH" | tr -d '\r' |
    sed -n 's/^x-pushmedia-outcome: //Ip')
  [[ $outcome == processed/cache || $outcome == processed ]] || die "$name: the media URL answers $outcome"
done

# The spans the sink has received so far; after a pass, once the exporter has sent what the
# pass ended (it wakes every half second, or every IR_DELAY_MS): no new span for SETTLE_S seconds.
SETTLE_S=$([[ $COUNT == instructions ]] && echo $((IR_DELAY_MS / 1000 + 2)) || echo 1)
sink_spans() { cat sink.count 2>/dev/null || echo 0; }
settled_spans() {
  local last now
  last=$(sink_spans)
  while sleep "$SETTLE_S"; now=$(sink_spans); [[ $now != "$last" ]]; do last=$now; done
  echo "$now"
}
# cpu_split PID: the process's user and system ticks, and its exporter thread's (user + system).
cpu_split() {
  python3 - "$1" <<'PY'
import os, sys
pid = sys.argv[1]
def fields(path):
    text = open(path).read()
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
_, process = fields(f"/proc/{pid}/stat")
exporter = 0
for task in os.listdir(f"/proc/{pid}/task"):
    try:
        comm, f = fields(f"/proc/{pid}/task/{task}/stat")
    except OSError:
        continue
    if comm == "pushmedia-trace":
        exporter += int(f[11]) + int(f[12])
print(process[11], process[12], exporter)
PY
}
# with_spans NAME BEFORE PID SPLIT: once the sink has received what the pass's spans the exporter
# sends (it wakes every half second, and sooner for each full batch), adds to NAME's record the
# spans received since BEFORE per request, and the server's CPU per request since SPLIT
# (cpu_split) counted to then: so the exporter's work on the pass's last spans is counted too.
# user_us, sys_us and exporter_us split it.
with_spans() {
  local spans
  spans=$(settled_spans)
  python3 - "$1" "$2" "$spans" "$TICK" "$4" "$(cpu_split "$3")" <<'PY'
import json, sys
name, before, after, tick = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
start, end = [list(map(int, text.split())) for text in sys.argv[5:7]]
lines = open("runs.jsonl").read().splitlines()
for i, line in enumerate(lines):
    r = json.loads(line)
    if r["name"] == name:
        per = lambda ticks: round(ticks / tick * 1e6 / max(1, r["ok"]), 2)
        r["spans_per_request"] = round((after - before) / max(1, r["ok"]), 3)
        r["cpu_us"] = per(end[0] + end[1] - start[0] - start[1])
        r["user_us"], r["sys_us"], r["exporter_us"] = (per(end[k] - start[k]) for k in range(3))
        lines[i] = json.dumps(r)
        print(f"    {name}: {r['cpu_us']} µs CPU/request, to the last span sent (user {r['user_us']}, "
              f"system {r['sys_us']}, exporter {r['exporter_us']}), {r['spans_per_request']} spans", file=sys.stderr)
open("runs.jsonl", "w").write("\n".join(lines) + "\n")
PY
}

# wrk_pass NAME CONFIG PATH-KIND: one wrk pass, recorded in runs.jsonl with the server's CPU per request.
wrk_pass() {
  local name=$1 config=$2 kind=$3 pid=${PID_OF[$2]} port=${HOOK_OF[$2]} before after spans split
  spans=$(settled_spans)
  split=$(cpu_split "$pid")
  before=$(cpu_ticks "$pid")
  if [[ $kind == process ]]; then
    WRK_GAP_MS=$GAP_MS wrk -t1 -c32 -d"${SECONDS_EACH}s" --latency -s "$BENCH/wrk_process.lua" \
      "http://127.0.0.1:$port" -- hit urls.txt >"wrk-$name.txt" 2>&1 || true
  else
    WRK_GAP_MS=$GAP_MS wrk -t1 -c32 -d"${SECONDS_EACH}s" --latency -s "$BENCH/wrk_paced.lua" \
      "http://127.0.0.1:$port$MEDIA_URL_PATH" >"wrk-$name.txt" 2>&1 || true
  fi
  after=$(cpu_ticks "$pid")
  python3 - "$name" "$before" "$after" "$TICK" <<'PY' >>runs.jsonl
import json, re, sys
name, before, after, tick = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
text = open(f"wrk-{name}.txt").read()
requests = int(re.search(r"(\d+) requests in", text).group(1))
bad = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
bad += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
r = {"name": name, "per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)), "ok": requests - bad,
     "errors": bad, "cpu_us": round((after - before) / tick * 1e6 / max(1, requests), 2)}
print(json.dumps(r))
print(f"  {name:<26} {r['per_s']:>9.0f} req/s  {r['cpu_us']:>7} µs CPU/request  errors {bad}", file=sys.stderr)
PY
  with_spans "$name" "$spans" "$pid" "$split"
}

# url_pass NAME CONFIG: the media URL at URL_RATE a second (h2load over HTTP/1.1), recorded as wrk_pass does.
url_pass() {
  local name=$1 pid=${PID_OF[$2]} spans split
  spans=$(settled_spans)
  split=$(cpu_split "$pid")
  h2load_run "$name" "$pid" requests "http://127.0.0.1:${HOOK_OF[$2]}$MEDIA_URL_PATH" --h1 -c "$URL_CLIENTS" -t 1 \
    -n "$((URL_RATE * SECONDS_EACH))" --rps "$((URL_RATE / URL_CLIENTS))"
  with_spans "$name" "$spans" "$pid" "$split"
}

measures() { [[ " $PATHS " == *" $1 "* ]]; }
# served REQUESTS OUTPUT: REQUESTS, or for `wrk` the requests wrk says it made (OUTPUT: its output).
served() {
  if [[ $1 == wrk ]]; then sed -n 's/^ *\([0-9][0-9]*\) requests in.*/\1/p' "$2"; else echo "$1"; fi
}

# ir_pass NAME CONFIG REQUESTS COMMAND...: the instructions CONFIG's server ran while COMMAND served
# REQUESTS (`wrk`: as many as wrk says it made), and, on a traced server, its exporter's thread
# until the sink received the last of their spans; appended to ir.jsonl with the spans per
# request. Every span sent before it must have been received. callgrind dumps and zeroes its
# counts before the pass, at its end and (traced) once its spans have arrived. While a traced
# server waits for its sink, only the exporter's thread is counted: the others run what every
# server runs after a pass (its timers and its connections closing: some 700,000 instructions a
# second under callgrind), which `off`, whose pass ends with its last answer, is not charged.
# Each path is warmed first (`warm_paths`). A relayed push is answered from the memo while the
# store remembers its media, and the store reads its index again every --index-cache-ttl (a
# minute by default): every push in flight then goes through the pipeline. At full speed that
# is a few hundred pushes a minute among hundreds of thousands; callgrind, tens of times slower,
# charges them to one pass and not another. The servers here read it once an hour.
ir_dump() { callgrind_control -d "$1" >/dev/null 2>&1; date +%s.%N; }
ir_pass() {
  local name=$1 config=$2 requests=$3 pid=${PID_OF[$2]} before after times=()
  shift 3
  warm_paths "$config"
  before=$(sink_spans)
  times+=("$(ir_dump "$pid")")
  "$@" >"ir-$name.out" 2>&1 || true
  times+=("$(ir_dump "$pid")")
  if [[ $config == off ]]; then
    after=$(sink_spans)
  else
    after=$(settled_spans)
    times+=("$(ir_dump "$pid")")
  fi
  python3 - "$name" "$(served "$requests" "ir-$name.out")" "$before" "$after" "$OUT/callgrind-$config" "${times[@]}" \
    <<'PY' >>ir.jsonl
import collections, glob, json, re, sys
name, served, before, after, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
times = [float(t) for t in sys.argv[6:]]
text = open(f"ir-{name}.out").read()
# h2load's answers that were not 2xx, wrk's that were not 2xx or 3xx, and its socket errors.
ok = int(m.group(1)) if (m := re.search(r"status codes: (\d+) 2xx", text)) else served
errors = served - ok + (int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0)
errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
# The dumps since the first (one file per thread each: BASE.N-T): the pass, then (traced) the wait.
dumps = collections.defaultdict(list)
for f in glob.glob(base + ".*-*"):
    dumps[int(f.rsplit(".", 1)[1].split("-")[0])].append(f)
numbers = sorted(dumps)[-(len(times) - 1):]
def total(f):
    return next(int(line.split()[1]) for line in open(f) if line.startswith("totals:"))
def exporter(f):
    return "SpanExporterC3run" in open(f).read()
ir, waited, left = sum(map(total, dumps[numbers[0]])), 0, 0
if len(numbers) == 2:
    waited = sum(total(f) for f in dumps[numbers[1]] if exporter(f))
    left = sum(total(f) for f in dumps[numbers[1]]) - waited
    ir += waited
per = lambda n: round(n / max(1, served))
r = {"name": name, "requests": served, "errors": errors, "ir_per_request": per(ir), "seconds": round(times[1] - times[0], 2),
     "exporter_after_per_request": per(waited), "others_after_per_request": per(left),
     "spans_per_request": round((after - before) / max(1, served), 3)}
print(json.dumps(r))
print(f"  {name:<26} {r['ir_per_request']:>10,} instructions/request  {r['spans_per_request']:.3f} spans"
      f"  errors {errors}  ({r['seconds']} s; after it, the exporter {r['exporter_after_per_request']:,}"
      f" and not counted {r['others_after_per_request']:,} a request)", file=sys.stderr)
PY
}

if [[ $COUNT == instructions ]]; then
  IR_N=${IR_N:-2000}
  IR_SECONDS=${IR_SECONDS:-20}
  IR_ROUNDS=${IR_ROUNDS:-2}
  : >ir.jsonl
  for config in "${NAMES[@]}"; do sed "s|^|https://localhost:${RELAY_OF[$config]}|" tokens.txt >"uris-$config.txt"; done
  # The warming requests' spans.
  settled_spans >/dev/null
  for round in $(seq "$IR_ROUNDS"); do
    log "instructions, round $round"
    for config in "${NAMES[@]}"; do
      measures process && ir_pass "process_${config}#$round" "$config" wrk wrk -t1 -c4 -d"${IR_SECONDS}s" \
        -s "$BENCH/wrk_process.lua" "http://127.0.0.1:${HOOK_OF[$config]}" -- hit urls.txt
      measures media_url && ir_pass "media_url_${config}#$round" "$config" "$IR_N" h2load --h1 \
        "http://127.0.0.1:${HOOK_OF[$config]}$MEDIA_URL_PATH" -c 4 -t 1 -n "$IR_N"
      measures apns && ir_pass "apns_${config}#$round" "$config" "$IR_N" h2load -i "uris-$config.txt" -d rich.json \
        -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$IR_N" -H "authorization: bearer $JWT" \
        -H "apns-topic: com.example.bench" -H "apns-push-type: alert"
      measures fcm && ir_pass "fcm_${config}#$round" "$config" "$IR_N" h2load "https://localhost:${FCM_OF[$config]}$SEND" \
        -d message.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$IR_N" -H "authorization: Bearer bench-oauth-token" \
        -H "content-type: application/json"
    done
  done
  python3 - "$IR_ROUNDS" "$RATIO" "$PATHS" <<'PY'
import json, statistics, sys
rounds, ratio, paths = range(1, int(sys.argv[1]) + 1), float(sys.argv[2]), sys.argv[3].split()
runs = {r["name"]: r for r in map(json.loads, open("ir.jsonl"))}
names = {"process": "cached `/v1/process`", "media_url": "cached media URL", "apns": "APNs campaign push",
         "fcm": "FCM campaign message"}
bad = [n for n, r in runs.items() if r["errors"]]
print(f"\nInstructions per request (user space, callgrind), each round's ratio to `off`; the last column "
      f"puts the {ratio * 100:g} % row's traced share at exactly {ratio * 100:g} % (its spans per request to the "
      f"100 % row's).\n\n| path | off, instructions/request | {ratio * 100:g} % sampled | 100 % sampled, exported "
      f"| spans per request ({ratio * 100:g} %, 100 %) | added per traced request | {ratio * 100:g} % at exactly "
      f"{ratio * 100:g} % |\n|---|---:|---:|---:|---:|---:|---:|")
results = {}
for path in paths:
    ir = {c: [runs[f"{path}_{c}#{n}"]["ir_per_request"] for n in rounds] for c in ("off", "sampled", "sampled_100")}
    spans = {c: statistics.median(runs[f"{path}_{c}#{n}"]["spans_per_request"] for n in rounds)
             for c in ("sampled", "sampled_100")}
    each = {c: [ir[c][i] / ir["off"][i] for i in range(len(ir["off"]))] for c in ("sampled", "sampled_100")}
    off = statistics.median(ir["off"])
    added = statistics.median(ir["sampled_100"]) - off
    share = spans["sampled"] / spans["sampled_100"] if spans["sampled_100"] else 0
    at_ratio = (off + ratio / share * (statistics.median(ir["sampled"]) - off)) / off if share else float("nan")
    results[path] = {"instructions": ir, "ratios": each, "spans_per_request": spans, "added_per_traced": added,
                     f"sampled_at_exactly_{ratio:g}": round(at_ratio, 4)}
    cells = [f"{statistics.median(each[c]):.3f}× ({', '.join(f'{x:.3f}' for x in each[c])})" for c in each]
    print(f"| {names[path]} | {off:,.0f} | " + " | ".join(cells) +
          f" | {spans['sampled']:.2f}, {spans['sampled_100']:.2f} | {added:,.0f} | {at_ratio:.3f}× |")
print(f"\nfailed passes: {bad or 'none'}")
json.dump({"paths": results, "errors": bad}, open("ir-results.json", "w"), indent=1)
PY
  exit
fi

: >runs.jsonl
for round in $(seq "$ROUNDS"); do
  order=("${NAMES[@]}")
  ((round % 2 == 0)) && order=(sampled_100 sampled off before)
  log "round $round"
  measures process && for config in "${order[@]}"; do wrk_pass "process_${config}#$round" "$config" process; done
  measures media_url && for config in "${order[@]}"; do
    if [[ -n $URL_RATE ]]; then url_pass "media_url_${config}#$round" "$config"
    else wrk_pass "media_url_${config}#$round" "$config" media_url; fi
  done
  measures apns && for config in "${order[@]}"; do
    sed "s|^|https://localhost:${RELAY_OF[$config]}|" tokens.txt >"uris-$config.txt"
    spans=$(settled_spans)
    split=$(cpu_split "${PID_OF[$config]}")
    h2load_run "apns_${config}#$round" "${PID_OF[$config]}" pushes -i "uris-$config.txt" \
      -d rich.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$PUSHES" "${PACE[@]}" \
      -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert"
    with_spans "apns_${config}#$round" "$spans" "${PID_OF[$config]}" "$split"
  done
  measures fcm && for config in "${order[@]}"; do
    spans=$(settled_spans)
    split=$(cpu_split "${PID_OF[$config]}")
    h2load_run "fcm_${config}#$round" "${PID_OF[$config]}" messages "https://localhost:${FCM_OF[$config]}$SEND" \
      -d message.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$PUSHES" "${PACE[@]}" \
      -H "authorization: Bearer bench-oauth-token" -H "content-type: application/json"
    with_spans "fcm_${config}#$round" "$spans" "${PID_OF[$config]}" "$split"
  done
done

# Where the 100 % server's CPU goes: perf profiles (call graphs) of a hook pass, a media URL pass
# and a push pass, summed by shared object and by symbol (perf-*-dso.txt, perf-*-symbols.txt,
# perf-*-inclusive.txt). PERF=0 skips.
# Each path without traces beside it (perf-*_off-*), to tell what the spans add.
for config in off sampled_100; do
  measures process && relay_perf "process_${config/sampled_/}" "${PID_OF[$config]}" wrk -t1 -c32 -d9s \
    -s "$BENCH/wrk_process.lua" "http://127.0.0.1:${HOOK_OF[$config]}" -- hit urls.txt
done
for config in off sampled_100; do
  measures media_url && relay_perf "media_url_${config/sampled_/}" "${PID_OF[$config]}" wrk -t1 -c32 -d9s \
    "http://127.0.0.1:${HOOK_OF[$config]}$MEDIA_URL_PATH"
done
for config in off sampled_100; do
  measures apns && relay_perf "apns_${config/sampled_/}" "${PID_OF[$config]}" h2load -i "uris-$config.txt" -d rich.json \
    -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$PUSHES" "${PACE[@]}" -H "authorization: bearer $JWT" \
    -H "apns-topic: com.example.bench" -H "apns-push-type: alert"
done

# Allocations per request: glibc's malloc (everything Swift allocates goes through it) counted by
# a uprobe while a fixed number of pushes, messages or media URLs are served (hook requests: for
# 5 s of wrk, divided by the requests it counted), untraced and at 100 %; their sites on the APNs
# and hook paths, untraced and at 100 % (allocs-apns-sites.txt, allocs-process-sites.txt: the
# first frame above the allocator).
# ALLOCS=0, or no uprobe, skips.
LIBC=$(ldd "$BIN" | awk '/libc.so.6/ {print $3}')
if [[ ${ALLOCS:-1} != 0 && -n $LIBC ]] && { perf probe -q -x "$LIBC" malloc >/dev/null 2>&1 ||
  perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc'; }; then
  log "allocations per request"
  # alloc_pass NAME PID REQUESTS COMMAND...: mallocs per request while COMMAND serves REQUESTS
  # (`wrk`: as many as wrk says it made).
  alloc_pass() {
    local name=$1 pid=$2 requests=$3 stat_pid
    shift 3
    perf stat -x, -e probe_libc:malloc -p "$pid" -o "allocs-$name.txt" &
    stat_pid=$!
    sleep 0.5
    "$@" >"allocs-$name.out" 2>&1 || true
    kill -INT "$stat_pid"
    wait "$stat_pid" || true
    python3 - "$name" "$(served "$requests" "allocs-$name.out")" <<'PY' >>allocs.jsonl
import json, sys
name, requests = sys.argv[1], int(sys.argv[2])
count = next(int(float(line.split(",")[0])) for line in open(f"allocs-{name}.txt") if "probe_libc:malloc" in line)
print(json.dumps({"name": name, "mallocs": count, "per_request": round(count / requests, 2)}))
print(f"  {name:<22} {count / requests:8.2f} mallocs/request", file=sys.stderr)
PY
  }
  : >allocs.jsonl
  ALLOC_N=20000
  for config in off sampled_100; do
    measures process && alloc_pass "process_$config" "${PID_OF[$config]}" wrk env WRK_GAP_MS="$GAP_MS" wrk -t1 \
      -c32 -d5s -s "$BENCH/wrk_process.lua" "http://127.0.0.1:${HOOK_OF[$config]}" -- hit urls.txt
    measures apns && alloc_pass "apns_$config" "${PID_OF[$config]}" "$ALLOC_N" h2load -i "uris-$config.txt" \
      -d rich.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$ALLOC_N" "${PACE[@]}" -H "authorization: bearer $JWT" \
      -H "apns-topic: com.example.bench" -H "apns-push-type: alert"
    measures fcm && alloc_pass "fcm_$config" "${PID_OF[$config]}" "$ALLOC_N" h2load \
      "https://localhost:${FCM_OF[$config]}$SEND" -d message.json -c "$CONNECTIONS" -m "$STREAMS" -t 1 -n "$ALLOC_N" \
      "${PACE[@]}" -H "authorization: Bearer bench-oauth-token" -H "content-type: application/json"
    measures media_url && alloc_pass "media_url_$config" "${PID_OF[$config]}" "$ALLOC_N" h2load --h1 \
      "http://127.0.0.1:${HOOK_OF[$config]}$MEDIA_URL_PATH" -c "$URL_CLIENTS" -t 1 -n "$ALLOC_N"
  done
  # alloc_sites PATH REQUESTS COMMAND...: where PATH's requests allocate, untraced and at 100 %
  # (allocs-PATH-sites.txt: the first frame above the allocator), while COMMAND serves REQUESTS
  # (`wrk`: as many as wrk says it made); in COMMAND, @CONFIG@ stands for the configuration
  # (`off`, `sampled_100`) and @HOOK@ for its server's hook port.
  alloc_sites() {
    local path=$1 requests=$2 config record_pid command counts=()
    shift 2
    for config in off sampled_100; do
      command=("${@//@CONFIG@/$config}")
      command=("${command[@]//@HOOK@/${HOOK_OF[$config]}}")
      perf record -q -g -e probe_libc:malloc -p "${PID_OF[$config]}" -o "allocs-${path}_$config.data" >/dev/null 2>&1 &
      record_pid=$!
      sleep 0.5
      "${command[@]}" >"allocs-${path}_$config.sites.out" 2>&1 || true
      kill -INT "$record_pid"
      wait "$record_pid" || true
      perf script -i "allocs-${path}_$config.data" -F ip,sym >"allocs-${path}_$config.stacks" 2>/dev/null || true
      counts+=("$(served "$requests" "allocs-${path}_$config.sites.out")")
    done
    python3 - "$path" "${counts[@]}" <<'PY' >"allocs-$path-sites.txt" || true
import collections, sys
path, served = sys.argv[1], {"off": int(sys.argv[2]), "sampled_100": int(sys.argv[3])}
# The first frame above the allocator and the standard library's generic code.
runtime = ("swift_", "_swift", "malloc", "__libc_malloc", "$ss", "__swift")
def sites(config):
    found = collections.Counter()
    for block in open(f"allocs-{path}_{config}.stacks").read().split("\n\n"):
        frames = [line.split(None, 1)[1] for line in block.strip().splitlines() if len(line.split(None, 1)) == 2]
        if frames:
            found[next((f for f in frames[1:] if not f.startswith(runtime)), "(no frame above the allocator)")] += 1
    return {site: count / served[config] for site, count in found.items()}
off, on = sites("off"), sites("sampled_100")
print(f"mallocs per request of {path} by site: untraced, 100 %, the difference")
print(f"{sum(off.values()):7.2f} {sum(on.values()):7.2f} {sum(on.values()) - sum(off.values()):+7.2f}  all")
for site in sorted(set(off) | set(on), key=lambda s: -abs(on.get(s, 0) - off.get(s, 0)))[:40]:
    print(f"{off.get(site, 0):7.2f} {on.get(site, 0):7.2f} {on.get(site, 0) - off.get(site, 0):+7.2f}  {site[:150]}")
PY
  }
  measures apns && alloc_sites apns 5000 h2load -i "uris-@CONFIG@.txt" -d rich.json -c "$CONNECTIONS" \
    -m "$STREAMS" -t 1 -n 5000 "${PACE[@]}" -H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" \
    -H "apns-push-type: alert"
  measures process && alloc_sites process wrk env WRK_GAP_MS="$GAP_MS" wrk -t1 -c32 -d3s \
    -s "$BENCH/wrk_process.lua" "http://127.0.0.1:@HOOK@" -- hit urls.txt
  perf probe -q -d probe_libc:malloc >/dev/null 2>&1 || true
fi

sleep 2
kill "$OTLP_PID" 2>/dev/null || true
wait "$OTLP_PID" 2>/dev/null || true
SPANS=$(sed -n 's/^spans //p' otlp-sink.out)
DROPPED=$(curl -s "http://127.0.0.1:${HOOK_OF[sampled_100]}/metrics" | sed -n 's/^pushmedia_trace_spans_dropped_total //p')

SAME_BUILD=$([[ $BEFORE == "$NEW_BIN" ]] && echo 1 || echo 0)
python3 - "$SPANS" "${DROPPED:-0}" "$ROUNDS" "$RATIO" "$PATHS" "$SAME_BUILD" <<'PY'
import json, statistics, sys
spans, dropped, rounds, ratio = sys.argv[1], sys.argv[2], range(1, int(sys.argv[3]) + 1), float(sys.argv[4])
same_build = sys.argv[6] == "1"
runs = {r["name"]: r for r in map(json.loads, open("runs.jsonl"))}
paths = sys.argv[5].split()
configs = ["off", "sampled", "sampled_100"]
ratios = {}
for path in paths:
    for config in configs:
        each = [runs[f"{path}_{config}#{n}"]["cpu_us"] / runs[f"{path}_before#{n}"]["cpu_us"] for n in rounds]
        ratios[f"{path}/{config}"] = {"rounds": [round(x, 3) for x in each], "median": round(statistics.median(each), 3)}
bad = {n: r for n, r in runs.items() if r.get("errors") or r.get("ok", 1) == 0}
json.dump({"runs": runs, "ratios": ratios, "spans_received": int(spans or 0), "spans_dropped": float(dropped),
           "errors": list(bad)}, open("results.json", "w"), indent=1)
print(f"\n| path | before, CPU-µs/request | off | {ratio * 100:g} % sampled | 100 % sampled, exported | spans per request ({ratio * 100:g} %, 100 %) |\n|---|---:|---:|---:|---:|---:|")
names = {"process": "cached `/v1/process`", "media_url": "cached media URL", "apns": "APNs campaign push",
         "fcm": "FCM campaign message"}
for path in paths:
    base = statistics.median(runs[f"{path}_before#{n}"]["cpu_us"] for n in rounds)
    cells = [f"{ratios[f'{path}/{c}']['median']:.3f}× ({', '.join(f'{x:.3f}' for x in ratios[f'{path}/{c}']['rounds'])})"
             for c in configs]
    per = [statistics.median(runs[f"{path}_{c}#{n}"].get("spans_per_request", 0) for n in rounds)
           for c in ("sampled", "sampled_100")]
    print(f"| {names[path]} | {base:.1f} | " + " | ".join(cells) + f" | {per[0]:.2f}, {per[1]:.2f} |")
print(f"\nspans received by the sink: {spans}; dropped (sampled_100): {dropped}; failed passes: {list(bad) or 'none'}")
if same_build:
    # `before` and `off` are then the same build without traces: each round's ratio to their
    # mean, which one server's drift moves half as much.
    print(f"\nThe same, to the mean of `before` and `off` (the same build, no traces) in each round:\n\n"
          f"| path | {ratio * 100:g} % sampled | 100 % sampled, exported | 100 %: CPU-µs added per request |\n|---|---:|---:|---:|")
    for path in paths:
        base = {n: (runs[f"{path}_before#{n}"]["cpu_us"] + runs[f"{path}_off#{n}"]["cpu_us"]) / 2 for n in rounds}
        cells = []
        for c in ("sampled", "sampled_100"):
            each = [runs[f"{path}_{c}#{n}"]["cpu_us"] / base[n] for n in rounds]
            cells.append(f"{statistics.median(each):.3f}× ({', '.join(f'{x:.3f}' for x in each)})")
        added = statistics.median(runs[f"{path}_sampled_100#{n}"]["cpu_us"] - base[n] for n in rounds)
        print(f"| {names[path]} | " + " | ".join(cells) + f" | {added:.1f} |")
PY
