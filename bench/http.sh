#!/usr/bin/env bash
# The HTTP hook's fast paths beside their floors, in one run, on the corpus of run.sh:
#   healthz        GET /healthz of the same server: what one request costs Hummingbird itself
#   process_hit    POST /v1/process, every request a cache hit, the text different each time
#   process_same   the same body every time (answered from the memo of repeated bodies)
#   media          GET /media/<name> of a stored attachment (a local store)
#   nginx_media    nginx (one worker, sendfile) serving the same file from the same directory
#   perf           where a cache hit's CPU goes (perf-dso.txt, perf-inclusive.txt; PERF=0 skips)
#
#   bench/http.sh          HIT_SET=20 SECONDS_EACH=15 CONNECTIONS=64
#
# wrk runs on the same 2 cores as the server, as in run.sh. Writes bench/out/http/results.json
# and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/http"
HIT_SET=${HIT_SET:-20}
SECONDS_EACH=${SECONDS_EACH:-15}
CONNECTIONS=${CONNECTIONS:-64}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
PY="$BENCH/.venv/bin/python"
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

log "tools and build"
need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx-light)
command -v perf >/dev/null || need_apt+=(linux-perf)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
[[ -x $PY ]] || python3 -m venv "$BENCH/.venv"
"$PY" -c "import pyvips" 2>/dev/null || "$BENCH/.venv/bin/pip" install -q pyvips
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  pkg-config --exists vips libcurl 2>/dev/null || "$ROOT/scripts/setup.sh"
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
rm -rf "$OUT"; mkdir -p "$OUT"

log "corpus ($HIT_SET items) and origin"
CORPUS="$BENCH/out/corpus"
VIPS_CONCURRENCY=1 "$PY" "$BENCH/gen_corpus.py" "$CORPUS" --count "$HIT_SET" --jobs 2
ORIGIN_PORT=$(free_port)
PIDS+=("$(start_nginx "$OUT/origin" "$CORPUS" "$ORIGIN_PORT")")
wait_http "http://127.0.0.1:$ORIGIN_PORT/manifest.json"
python3 - "$CORPUS/manifest.json" "$HIT_SET" "http://127.0.0.1:$ORIGIN_PORT" > "$OUT/hit.txt" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["items"][: int(sys.argv[2])]
for item in items:
    print(f"{sys.argv[3]}/{item['name']}")
PY

serve() { # PORT: the hook on a local store, logging to $OUT/serve.log
  local port=$1
  "$BIN" serve --port "$port" --allow-private-networks --store "$OUT/store" --budget 60s >> "$OUT/serve.out" 2>> "$OUT/serve.log" &
  echo $!
}
HOOK_PORT=$(free_port)
HOOK="http://127.0.0.1:$HOOK_PORT"
HOOK_PID=$(serve "$HOOK_PORT")
PIDS+=("$HOOK_PID")
wait_http "$HOOK/healthz"

log "warm the cache: $HIT_SET corpus URLs"
while read -r url; do
  curl -fsS -o /dev/null -H 'Content-Type: application/json' \
    --data "{\"aps\":{\"alert\":{\"title\":\"Bench\",\"body\":\"warm\"},\"mutable-content\":1},\"media_url\":\"$url\"}" "$HOOK/v1/process"
done < "$OUT/hit.txt"
# The stored attachment closest to 158 KB, served by both /media and nginx.
MEDIA=$(python3 - "$OUT/store" <<'PY'
import os, sys
files = [(abs(os.path.getsize(os.path.join(sys.argv[1], f)) - 158_000), f) for f in os.listdir(sys.argv[1]) if f.endswith(".jpg")]
print(min(files)[1])
PY
)
MEDIA_BYTES=$(stat -c %s "$OUT/store/$MEDIA")
NGINX_PORT=$(free_port)
PIDS+=("$(start_nginx "$OUT/nginx" "$OUT/store" "$NGINX_PORT")")
wait_http "http://127.0.0.1:$NGINX_PORT/$MEDIA"

pass() { # NAME PID URL [wrk args...]: one wrk pass; CPU of PID and of wrk
  local name=$1 pid=$2 url=$3 c0 c1; shift 3
  c0=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  python3 "$BENCH/measure.py" run --name "${name}_wrk" --items 0 --out "$OUT/$name.wrkproc.json" --stdout "$OUT/$name.wrk.txt" -- \
    wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --timeout 30s --latency "$url" "$@" >/dev/null 2>&1 || true
  c1=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  python3 - "$OUT" "$name" "$c0" "$c1" <<'PY'
import json, re, sys
out, name, c0, c1 = sys.argv[1:5]
text = open(f"{out}/{name}.wrk.txt").read()
def us(v, unit): return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", text)
errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
requests = int(re.search(r"(\d+) requests in", text).group(1))
cpu = float(c1) - float(c0)
r = {"name": name, "req_per_s": rate, "p50_ms": us(*p50.groups()) / 1e3, "p99_ms": us(*p99.groups()) / 1e3,
     "requests": requests, "errors": errors + non2xx, "server_cpu_ms_per_request": round(cpu * 1e3 / max(1, requests), 4),
     "wrk_cpu_s": json.load(open(f"{out}/{name}.wrkproc.json"))["cpu_s"]}
json.dump(r, open(f"{out}/{name}.json", "w"))
print(f"  {name}: {rate:.0f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, errors {r['errors']}, "
      f"server {r['server_cpu_ms_per_request']:.3f} CPU-ms/request", file=sys.stderr)
PY
}

log "wrk passes: $CONNECTIONS connections, ${SECONDS_EACH}s each (media: $MEDIA, $MEDIA_BYTES bytes)"
pass healthz "$HOOK_PID" "$HOOK/healthz"
pass process_hit "$HOOK_PID" "$HOOK" -s "$BENCH/wrk_process.lua" -- hit "$OUT/hit.txt" 60000
pass process_same "$HOOK_PID" "$HOOK" -s "$BENCH/wrk_process.lua" -- same "$OUT/hit.txt" 60000
pass media "$HOOK_PID" "$HOOK/media/$MEDIA"
pass nginx_media "$(cat "$OUT/nginx/nginx.pid")" "http://127.0.0.1:$NGINX_PORT/$MEDIA"
kill "$HOOK_PID"; wait "$HOOK_PID" 2>/dev/null || true

if [[ ${PERF:-1} == 1 ]] && command -v perf >/dev/null && perf record -q -o /dev/null -e cpu-clock true 2>/dev/null; then
  # valgrind (3.19, Debian 12) cannot run this binary (it cannot read Swift 6's DWARF 5 and, with
  # the debug info stripped, crashes inside the Swift runtime), and this machine has no hardware
  # counters; so the profile is perf's cpu-clock sampling, which shows shares, not counts.
  log "perf profile of the hook under cache-hit load (not timed)"
  HOOK_PID=$(serve "$HOOK_PORT")
  PIDS+=("$HOOK_PID")
  wait_http "$HOOK/healthz"
  wrk -t1 -c"$CONNECTIONS" -d12s --timeout 30s "$HOOK" -s "$BENCH/wrk_process.lua" -- hit "$OUT/hit.txt" 60000 >/dev/null 2>&1 &
  WRK_PID=$!
  sleep 1
  perf record -q -e cpu-clock -F 999 -g -p "$HOOK_PID" -o "$OUT/perf.data" -- sleep 8 2>/dev/null || true
  wait "$WRK_PID" || true
  perf report -i "$OUT/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 12 > "$OUT/perf-dso.txt" || true
  perf report -i "$OUT/perf.data" --children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' \
    | { swift demangle --simplified 2>/dev/null || cat; } | grep -v '\[k\]' | head -n 80 | cut -c1-160 > "$OUT/perf-inclusive.txt" || true
  rm -f "$OUT/perf.data"
  kill "$HOOK_PID"; wait "$HOOK_PID" 2>/dev/null || true
fi

python3 - "$OUT" "$MEDIA_BYTES" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, os, sys
out, media_bytes, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = {n: json.load(open(f"{out}/{n}.json")) for n in ["healthz", "process_hit", "process_same", "media", "nginx_media"]}
summary = {"commit": commit, "media_bytes": media_bytes, "passes": r,
           "ratios": {"process_hit / healthz (req/s)": round(r["process_hit"]["req_per_s"] / r["healthz"]["req_per_s"], 3),
                      "media / nginx_media (req/s)": round(r["media"]["req_per_s"] / r["nginx_media"]["req_per_s"], 3)}}
json.dump(summary, open(f"{out}/results.json", "w"), indent=1)
print(f"\n| pass | req/s | p50 ms | p99 ms | server CPU-ms/request | errors |\n|---|---:|---:|---:|---:|---:|")
for n, p in r.items():
    print(f"| {n} | {p['req_per_s']:,.0f} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} | {p['server_cpu_ms_per_request']:.3f} | {p['errors']} |")
print()
for k, v in summary["ratios"].items(): print(f"- {k}: {v}")
print(f"- server CPU per request, process_hit / healthz: {r['process_hit']['server_cpu_ms_per_request'] / r['healthz']['server_cpu_ms_per_request']:.2f}")
print(f"- commit {commit}, media file {media_bytes:,} bytes")
PY
