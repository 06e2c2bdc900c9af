#!/usr/bin/env bash
# PushMedia benchmark: one command, same machine, same run, same corpus for every contender.
#
#   bench/run.sh                 full run (200 items, 60 s miss pass, 5-minute soak, 1,000-item batch)
#   QUICK=1 bench/run.sh         smoke run (20 items, short passes)
#
# Environment (all optional):
#   QUICK=1            small smoke run
#   ITEMS=N            corpus items used (default 200; QUICK 20)
#   SOAK_SECONDS=S     HTTP hook soak length (default 300; QUICK 20)
#   MISS_SECONDS=S     cache-miss wrk pass (default 60; QUICK 15)
#   HIT_SECONDS=S      each cache-hit wrk pass (default 30; QUICK 8)
#   MEM_ITEMS=N        items of the memory-test batch (default 1000; QUICK 60)
#   MEM_VIDEOS=N       45 MB videos among them (default 10; QUICK 2)
#   DECOMP_ITEMS=N     items of the part-by-part vipsthumbnail passes (default 40; QUICK 20)
#   HIT_SET=N          payloads cycled by the cache-hit passes and the soak (default 50; QUICK 20)
#   CONCURRENCY=N      workers of every contender (default 2)
#   CONNECTIONS=N      wrk connections (default 64)
#   PERF=0             skip the perf profiles (pushmedia batch, the hook under cache hits)
#   MEM_DIAG=0         skip the second memory-test batch (MALLOC_ARENA_MAX=2), about 10 minutes
#   SKIP_BUILD=1       use .build-bench/release/pushmedia as it is
#
# Writes bench/out/ (corpus, logs, results/*.json) and bench/RESULTS.md. See bench/README.md.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out"
# The exact command, with the settings given in the environment.
COMMAND=""
for v in QUICK ITEMS SOAK_SECONDS MISS_SECONDS HIT_SECONDS MEM_ITEMS MEM_VIDEOS HIT_SET DECOMP_ITEMS CONCURRENCY CONNECTIONS PERF MEM_DIAG SKIP_BUILD; do
  if [[ -n ${!v:-} ]]; then COMMAND+="$v=${!v} "; fi
done
COMMAND+="bench/run.sh"
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
  ITEMS=${ITEMS:-20}; SOAK_SECONDS=${SOAK_SECONDS:-20}; MISS_SECONDS=${MISS_SECONDS:-15}
  HIT_SECONDS=${HIT_SECONDS:-8}; MEM_ITEMS=${MEM_ITEMS:-60}; MEM_VIDEOS=${MEM_VIDEOS:-2}; HIT_SET=${HIT_SET:-20}
  DECOMP_ITEMS=${DECOMP_ITEMS:-20}
else
  ITEMS=${ITEMS:-200}; SOAK_SECONDS=${SOAK_SECONDS:-300}; MISS_SECONDS=${MISS_SECONDS:-60}
  HIT_SECONDS=${HIT_SECONDS:-30}; MEM_ITEMS=${MEM_ITEMS:-1000}; MEM_VIDEOS=${MEM_VIDEOS:-10}; HIT_SET=${HIT_SET:-50}
  DECOMP_ITEMS=${DECOMP_ITEMS:-40}
fi
CONCURRENCY=${CONCURRENCY:-2}
CONNECTIONS=${CONNECTIONS:-64}
PERF=${PERF:-1}
BIN="$ROOT/.build-bench/release/pushmedia"
VENV="$BENCH/.venv"
PY="$VENV/bin/python"
RES="$OUT/results"
RUN="$OUT/run"
LISTS="$OUT/lists"

source "$BENCH/lib.sh"  # log, die, free_port, wait_http, busy, start_nginx

# Processes this script started; stopped on exit, by pid.
PIDS=()
kill_tree() { # PID: it and its descendants (thumbor's forked workers outlive their parent)
  local p
  for p in $(python3 "$BENCH/measure.py" tree "$1"); do kill -TERM "$p" 2>/dev/null || true; done
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    # Only a process that is still this script's child (a finished one's pid may be reused).
    [[ -r /proc/$pid/stat && $(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) == "$$" ]] && kill_tree "$pid"
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

mkdir -p "$OUT" "$RES" "$RUN" "$LISTS"
rm -f "$RES"/*.json "$RES"/*.txt "$RES"/*.csv
START_EPOCH=$(date +%s)
echo "$COMMAND" > "$RES/command.txt"
cat /proc/loadavg > "$RES/loadavg-start.txt"
uptime > "$RES/uptime-start.txt"

# ---------------------------------------------------------------------------------------------
log "1. tools"
need_apt=()
command -v vipsthumbnail >/dev/null || need_apt+=(libvips-tools)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx-light)
command -v ffmpeg >/dev/null || need_apt+=(ffmpeg)
command -v curl >/dev/null || need_apt+=(curl)
dpkg -s libmagic1 >/dev/null 2>&1 || need_apt+=(libmagic1)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  echo "apt-get install ${need_apt[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if [[ ! -x $PY ]]; then
  python3 -m venv "$VENV"
fi
PIP_PACKAGES=(thumbor requests python-magic Pillow pillow-heif pyvips)
if ! "$PY" -c 'import thumbor, requests, magic, PIL, pillow_heif, pyvips' 2>/dev/null; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "${PIP_PACKAGES[@]}"
fi
"$VENV/bin/pip" freeze 2>/dev/null | grep -iE '^(thumbor|pillow|pillow.heif|requests|python.magic|pyvips|tornado)==' > "$RES/pip-versions.txt" || true

# ---------------------------------------------------------------------------------------------
log "2. build PushMedia (release, .build-bench)"
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  pkg-config --exists vips libcurl 2>/dev/null || "$ROOT/scripts/setup.sh"
  # Only the pushmedia product: the fuzz targets need other flags.
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
if [[ ${SKIP_BUILD:-0} != 1 ]]; then  # with SKIP_BUILD, report.py finds the commit from the binary's time
  git -C "$ROOT" rev-parse --short HEAD > "$RES/commit.txt" 2>/dev/null || rm -f "$RES/commit.txt"
fi

# ---------------------------------------------------------------------------------------------
log "3. corpus ($ITEMS items, deterministic)"
CORPUS="$OUT/corpus"
t0=$(date +%s)
VIPS_CONCURRENCY=1 "$PY" "$BENCH/gen_corpus.py" "$CORPUS" --count "$ITEMS" --jobs 2
echo $(( $(date +%s) - t0 )) > "$RES/corpus-seconds.txt"

# ---------------------------------------------------------------------------------------------
ORIGIN_PORT=$(free_port)
THUMBOR_PORT=$(free_port)
HOOK_PORT=$(free_port)
ORIGIN="http://127.0.0.1:$ORIGIN_PORT"

log "4. origin: nginx on 127.0.0.1:$ORIGIN_PORT"
ORIGIN_PID=$(start_nginx "$OUT/nginx" "$CORPUS" "$ORIGIN_PORT")
PIDS+=("$ORIGIN_PID")
wait_http "$ORIGIN/manifest.json"

"$PY" "$BENCH/lists.py" "$OUT" "$CORPUS" "$ORIGIN" "http://127.0.0.1:$THUMBOR_PORT" "$MEM_ITEMS" "$MEM_VIDEOS"
mapfile -t FORMATS < "$LISTS/formats.txt"

# Origin capacity: every item fetched once with curl, CONCURRENCY at a time (also warms the page cache).
python3 "$BENCH/measure.py" run --name origin_fetch --items "$ITEMS" --tree --origin-pid "$ORIGIN_PID" --out "$RES/origin_fetch.json" -- \
  xargs -a "$LISTS/urls.txt" -P "$CONCURRENCY" -n 1 curl -sSf -o /dev/null

# ---------------------------------------------------------------------------------------------
M() { python3 "$BENCH/measure.py" run --origin-pid "$ORIGIN_PID" "$@"; }
pm_batch() { # NAME PAYLOAD_DIR ITEMS [extra batch flags...]
  local name=$1 dir=$2 n=$3; shift 3
  rm -rf "$RUN/$name"; mkdir -p "$RUN/$name"
  M --name "$name" --items "$n" --out "$RES/$name.json" --stdout "$RUN/$name/stdout.txt" --stderr "$RUN/$name/stderr.txt" -- \
    "$BIN" batch "$dir" --out "$RUN/$name/out" --store "$RUN/$name/store" --allow-private-networks --budget 60s "$@"
  cp "$RUN/$name/out/report.json" "$RES/$name.report.json"
  rm -rf "$RUN/$name/store"
}
vips_pass() { # NAME MODE LIST ITEMS
  local name=$1 mode=$2 list=$3 n=$4
  rm -rf "$RUN/$name"; mkdir -p "$RUN/$name"
  VIPS_CONCURRENCY=1 M --name "$name" --items "$n" --tree --out "$RES/$name.json" --stderr "$RUN/$name.stderr.txt" -- \
    xargs -a "$list" -P "$CONCURRENCY" -n 1 "$BENCH/vips_item.sh" "$mode" "$RUN/$name" || true
  rm -f "$RUN/$name"/.in.*
}

log "5. contenders: $ITEMS items, $CONCURRENCY workers each"
log "5a. pushmedia batch --concurrency $CONCURRENCY (cold store)"
pm_batch pushmedia_batch "$OUT/payloads/all" "$ITEMS" --concurrency "$CONCURRENCY"

log "5b. curl + vipsthumbnail (xargs -P $CONCURRENCY)"
vips_pass vips_fetch fetch "$LISTS/urls.txt" "$ITEMS"

log "5c. vipsthumbnail on local files (no fetch)"
vips_pass vips_local local "$LISTS/paths.txt" "$ITEMS"

log "5d. curl + vipsthumbnail doing PushMedia's work (optimize_coding + 512 px thumbnail)"
vips_pass vips_equiv equiv "$LISTS/urls.txt" "$ITEMS"

log "5e. Python NSE-tutorial script (requests + python-magic + Pillow, pool of $CONCURRENCY)"
rm -rf "$RUN/python"; mkdir -p "$RUN/python"
M --name python_script --items "$ITEMS" --tree --out "$RES/python_script.json" --stdout "$RUN/python/results.jsonl" -- \
  "$PY" "$BENCH/nse_tutorial.py" "$LISTS/urls.txt" "$RUN/python/out" --processes "$CONCURRENCY" || true

log "5f. thumbor ($CONCURRENCY processes, $CONCURRENCY requests at a time)"
cat > "$OUT/thumbor.conf" <<EOF
LOADER = 'thumbor.loaders.http_loader'
STORAGE = 'thumbor.storages.no_storage'
RESULT_STORAGE = None
ENGINE = 'thumbor.engines.pil'
ALLOW_UNSAFE_URL = True
QUALITY = 82
PROGRESSIVE_JPEG = False
RESPECT_ORIENTATION = True
PRESERVE_EXIF_INFO = False
AUTO_WEBP = False
# Otherwise thumbor skips post-transform filters, format(jpeg) included, for GIF sources and answers a GIF.
USE_GIFSICLE_ENGINE = None
HTTP_LOADER_REQUEST_TIMEOUT = 120
HTTP_LOADER_CONNECT_TIMEOUT = 10
MAX_PIXELS = 75e6
EOF
"$VENV/bin/thumbor" -i 127.0.0.1 -p "$THUMBOR_PORT" -c "$OUT/thumbor.conf" --processes "$CONCURRENCY" -l error \
  > "$RUN/thumbor.log" 2>&1 &
THUMBOR_PID=$!
PIDS+=("$THUMBOR_PID")
wait_http "http://127.0.0.1:$THUMBOR_PORT/healthcheck"
# One request per worker first, so that module imports are not billed to the first items.
for _ in $(seq "$CONCURRENCY"); do
  curl -fsS -o /dev/null "$(sed -n '$p' "$LISTS/thumbor.txt" | sed 's/fit-in\/2048x2048/fit-in\/64x64/')" || true
done
rm -rf "$RUN/thumbor"
"$PY" "$BENCH/http_load.py" get "$LISTS/thumbor.txt" "$RUN/thumbor" --concurrency "$CONCURRENCY" \
  --server-pid "$THUMBOR_PID" --origin-pid "$ORIGIN_PID" --name thumbor --result "$RES/thumbor.json" || true
kill_tree "$THUMBOR_PID"
wait "$THUMBOR_PID" 2>/dev/null || true

log "5g. pushmedia batch with MALLOC_ARENA_MAX=2 (diagnostic: glibc malloc arenas and RSS)"
MALLOC_ARENA_MAX=2 pm_batch pushmedia_batch_arena2 "$OUT/payloads/all" "$ITEMS" --concurrency "$CONCURRENCY"

log "5h. pushmedia batch per format (vipsthumbnail's CPU per item comes from 5b/5d, item by item)"
for fmt in "${FORMATS[@]}"; do
  n=$(wc -l < "$LISTS/urls-$fmt.txt")
  pm_batch "fmt_pushmedia_$fmt" "$OUT/payloads/$fmt" "$n" --concurrency "$CONCURRENCY"
done

log "5i. PushMedia's extra image work, part by part (vipsthumbnail, local files, first $DECOMP_ITEMS items)"
head -n "$DECOMP_ITEMS" "$LISTS/paths.txt" > "$LISTS/decomp.txt"
for mode in local local_opt local_srgb local_x2 local_chain; do
  vips_pass "decomp_$mode" "$mode" "$LISTS/decomp.txt" "$DECOMP_ITEMS"
done
# The CPU of starting one vipsthumbnail process (16x16 image), to subtract from the two-process modes.
rm -rf "$RUN/tiny"; mkdir -p "$RUN/tiny"
vips black "$RUN/tiny/base.png" 16 16 --bands 3
for i in $(seq -w 1 20); do ln -s base.png "$RUN/tiny/t$i.png"; echo "$RUN/tiny/t$i.png"; done > "$LISTS/tiny.txt"
vips_pass decomp_startup local "$LISTS/tiny.txt" 20

if [[ $PERF == 1 ]] && command -v perf >/dev/null && perf record -q -o /dev/null -e cpu-clock true 2>/dev/null; then
  log "5j. perf profile of pushmedia batch (cpu-clock, not timed)"
  rm -rf "$RUN/perf"; mkdir -p "$RUN/perf"
  perf record -q -e cpu-clock -F 499 -o "$RUN/perf/perf.data" -- \
    "$BIN" batch "$OUT/payloads/all" --out "$RUN/perf/out" --store "$RUN/perf/store" --allow-private-networks \
    --budget 60s --concurrency "$CONCURRENCY" > /dev/null 2>&1 || true
  perf report -i "$RUN/perf/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 25 > "$RES/perf-dso.txt" || true
  perf report -i "$RUN/perf/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' \
    | grep -v ' 0x0000' | head -n 30 > "$RES/perf-sym.txt" || true
  rm -rf "$RUN/perf/store" "$RUN/perf/out"
fi

# ---------------------------------------------------------------------------------------------
log "6. HTTP hook: pushmedia serve on 127.0.0.1:$HOOK_PORT"
HOOK="http://127.0.0.1:$HOOK_PORT"
rm -rf "$RUN/serve"; mkdir -p "$RUN/serve"
"$BIN" serve --port "$HOOK_PORT" --allow-private-networks --store "$RUN/serve/store" --budget 60s \
  > "$RUN/serve/stdout.txt" 2>> "$RUN/serve/stderr.log" &
HOOK_PID=$!
PIDS+=("$HOOK_PID")
wait_http "$HOOK/healthz"
python3 "$BENCH/measure.py" rss "$HOOK_PID" > "$RES/serve_rss_idle.json"

wait_idle() { # until no job is running or queued
  local i
  for ((i = 0; i < 1200; i++)); do
    if curl -fsS "$HOOK/metrics" | awk '/^pushmedia_jobs_(in_flight|queued) /{s+=$2} END{exit !(s==0)}'; then return 0; fi
    sleep 0.25
  done
  echo "warning: jobs still running" >&2
}
wrk_pass() { # NAME MODE URLS SECONDS
  local name=$1 mode=$2 urls=$3 secs=$4 c0 c1 b0 b1
  c0=$(python3 "$BENCH/measure.py" tree-cpu "$HOOK_PID"); b0=$(busy)
  python3 "$BENCH/measure.py" run --name "${name}_wrk" --items 0 --out "$RES/$name.wrkproc.json" --stdout "$RES/$name.wrk.txt" -- \
    wrk -t1 -c"$CONNECTIONS" -d"${secs}s" --timeout 120s --latency -s "$BENCH/wrk_process.lua" "$HOOK" -- "$mode" "$urls" 60000 \
    2>/dev/null || true
  c1=$(python3 "$BENCH/measure.py" tree-cpu "$HOOK_PID"); b1=$(busy)
  python3 - "$RES/$name.wrk.txt" "$RES/$name.json" "$name" "$c0" "$c1" "$b0" "$b1" "$secs" <<'EOF'
import json, sys
txt, out, name, c0, c1, b0, b1, secs = sys.argv[1:9]
line = next((l for l in open(txt) if l.startswith("WRK_JSON ")), None)
if line is None:
    sys.exit(f"{name}: no WRK_JSON line in {txt}")
r = json.loads(line[len("WRK_JSON "):])
r["name"] = name
r["req_per_s"] = round(r["requests"] / (r["duration_us"] / 1e6), 1)
r["server_cpu_s"] = round(float(c1) - float(c0), 2)
r["machine_busy_cpu_s"] = round(float(b1) - float(b0), 2)
r["wrk_cpu_s"] = json.load(open(txt.replace(".wrk.txt", ".wrkproc.json")))["cpu_s"]
r["errors_total"] = sum(r["errors"].values()) + r["non2xx"] - r["errors"]["status"]
json.dump(r, open(out, "w"), indent=1)
l = r["latency_us"]
print(f"  {name}: {r['requests']} requests, {r['req_per_s']} req/s, p50 {l['p50']/1000:.1f} ms, p99 {l['p99']/1000:.1f} ms, "
      f"errors {r['errors_total']}, outcomes {r['outcomes']}, cache hits {r['cache_hits']}", file=sys.stderr)
EOF
}

log "6a. cache-miss pass: $CONNECTIONS connections, ${MISS_SECONDS}s, every request a new URL"
wrk_pass serve_miss miss "$LISTS/urls.txt" "$MISS_SECONDS"
wait_idle

log "6b. warm the cache with $HIT_SET corpus URLs"
head -n "$HIT_SET" "$LISTS/urls.txt" > "$LISTS/hit.txt"
head -n 1 "$LISTS/urls.txt" > "$LISTS/one.txt"
"$PY" "$BENCH/http_load.py" post "$HOOK" "$LISTS/hit.txt" --concurrency "$CONCURRENCY" --result "$RES/serve_warm.json"

log "6c. cache-hit passes: $CONNECTIONS connections, ${HIT_SECONDS}s each"
wrk_pass serve_hit_one hit "$LISTS/one.txt" "$HIT_SECONDS"
wrk_pass serve_hit_all hit "$LISTS/hit.txt" "$HIT_SECONDS"
wrk_pass serve_hit_same same "$LISTS/hit.txt" "$HIT_SECONDS"
if [[ $PERF == 1 ]] && command -v perf >/dev/null && perf record -q -o /dev/null -e cpu-clock true 2>/dev/null; then
  log "6c'. perf profile of the hook under cache-hit load (not timed)"
  wrk -t1 -c"$CONNECTIONS" -d12s --timeout 120s -s "$BENCH/wrk_process.lua" "$HOOK" -- hit "$LISTS/hit.txt" 60000 > /dev/null 2>&1 &
  WRK_PID=$!
  sleep 1
  perf record -q -e cpu-clock -F 499 -p "$HOOK_PID" -o "$RUN/serve/perf.data" -- sleep 8 2>/dev/null || true
  wait "$WRK_PID" || true
  perf report -i "$RUN/serve/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 20 > "$RES/perf-serve-dso.txt" || true
  perf report -i "$RUN/serve/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' \
    | grep -v ' 0x0000' | head -n 40 | { swift demangle --simplified 2>/dev/null || cat; } | cut -c1-200 > "$RES/perf-serve-sym.txt" || true
  rm -f "$RUN/serve/perf.data"
fi
wait_idle
sleep 2
python3 "$BENCH/measure.py" rss "$HOOK_PID" > "$RES/serve_rss_warm.json"

log "6d. soak: ${SOAK_SECONDS}s of cache hits at $CONNECTIONS connections + 1 stream of cache misses"
: > "$RES/soak-rss.csv"
python3 "$BENCH/measure.py" sample-rss "$HOOK_PID" "$RES/soak-rss.csv" "$((SOAK_SECONDS + 5))" &
SAMPLER_PID=$!
"$PY" "$BENCH/http_load.py" post "$HOOK" "$LISTS/urls.txt" --concurrency 1 --seconds "$SOAK_SECONDS" --distinct soak \
  --result "$RES/soak_misses.json" &
TRICKLE_PID=$!
PIDS+=("$SAMPLER_PID" "$TRICKLE_PID")
wrk_pass serve_soak hit "$LISTS/hit.txt" "$SOAK_SECONDS"
wait "$TRICKLE_PID" || true
wait_idle
sleep 2
wait "$SAMPLER_PID" 2>/dev/null || true
python3 "$BENCH/measure.py" rss "$HOOK_PID" > "$RES/serve_rss_soak.json"
kill -TERM "$HOOK_PID"
wait "$HOOK_PID" || true
grep -ciE 'error|fatal' "$RUN/serve/stderr.log" > "$RES/serve_log_errors.txt" || true
# The hook logs a line per request; keep the tail only.
tail -n 200 "$RUN/serve/stderr.log" > "$RUN/serve/stderr.tail.log"; rm -f "$RUN/serve/stderr.log"
rm -rf "$RUN/serve/store"

# ---------------------------------------------------------------------------------------------
log "7. memory: pushmedia batch of $MEM_ITEMS payloads ($MEM_VIDEOS × 45 MB video), default concurrency"
pm_batch mem_batch "$OUT/payloads/mem" "$MEM_ITEMS"
if [[ ${MEM_DIAG:-1} == 1 ]]; then
  log "7b. the same with MALLOC_ARENA_MAX=2 (diagnostic)"
  MALLOC_ARENA_MAX=2 pm_batch mem_batch_arena2 "$OUT/payloads/mem" "$MEM_ITEMS"
fi

# ---------------------------------------------------------------------------------------------
cat /proc/loadavg > "$RES/loadavg-end.txt"
uptime > "$RES/uptime-end.txt"
echo $(( $(date +%s) - START_EPOCH )) > "$RES/total-seconds.txt"
log "8. report"
"$PY" "$BENCH/report.py" "$OUT" "$BENCH/RESULTS.md"
echo "wrote $BENCH/RESULTS.md" >&2
