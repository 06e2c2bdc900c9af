#!/usr/bin/env bash
# Media URLs beside their floors, in one run:
#   url_cached    wrk on one media URL whose file is made (every request answered from the store)
#   nginx_file    nginx (one worker, sendfile, its access log written to a file) serving the same
#                 file from the store's directory: the floor of a cached media URL
#   media_N, url_N  PAIRS pairs (their order alternating): the same file through GET /media/<name>
#                 (the floor of the media URL's own work: the same stack, the same file) and the
#                 media URL; the ratio is the median of the pairs' ratios
#   media_large_N, url_large_N  the same for a large file: the 12 MP JPEG made for iOS (2048 px,
#                 hundreds of KB)
#   healthz       GET /healthz (a route that does nothing: what one request costs the HTTP stack)
#   cold          COLD_ITEMS distinct 12 MP JPEG sources, one at a time, each asked once as a media
#                 URL (GET .jpg: fetch, make, store, send) and, in turn, once through
#                 POST /v1/process followed by the phone's GET of the stored file (the same work
#                 and bytes through the hook); best of ROUNDS per item
# PushMedia runs as shipped: default settings, info logs written to a file.
#
#   bench/media-url.sh          SECONDS_EACH=15 CONNECTIONS=64 COLD_ITEMS=8 ROUNDS=2 PAIRS=3
#
# wrk runs on the same 2 cores as the servers. Writes bench/out/media-url/results.json and prints
# a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/media-url"
SECONDS_EACH=${SECONDS_EACH:-15}
CONNECTIONS=${CONNECTIONS:-64}
COLD_ITEMS=${COLD_ITEMS:-8}
ROUNDS=${ROUNDS:-2}
PAIRS=${PAIRS:-3}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

log "tools and build"
need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx-light)
command -v ffmpeg >/dev/null || need_apt+=(ffmpeg)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  pkg-config --exists vips libcurl 2>/dev/null || "$ROOT/scripts/setup.sh"
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
rm -rf "$OUT"; mkdir -p "$OUT/origin"

log "sources: a 12 MP JPEG (camera-like noise) and a 1200×800 WebP, on an nginx origin"
ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=4000x3000,noise=alls=24:allf=t" -frames:v 1 -q:v 3 \
  -y "$OUT/origin/photo-12mp.jpg"
cp "$ROOT/samples/media/banner.webp" "$OUT/origin/banner.webp"
for ((i = 0; i < COLD_ITEMS * ROUNDS * 2; i++)); do ln "$OUT/origin/photo-12mp.jpg" "$OUT/origin/cold-$i.jpg"; done
ORIGIN_PORT=$(free_port)
ORIGIN="http://127.0.0.1:$ORIGIN_PORT"
PIDS+=("$(start_nginx "$OUT/origin-nginx" "$OUT/origin" "$ORIGIN_PORT")")
wait_http "$ORIGIN/banner.webp"

HOOK_PORT=$(free_port)
HOOK="http://127.0.0.1:$HOOK_PORT"
"$BIN" serve --port "$HOOK_PORT" --allow-private-networks --store "$OUT/store" --url-allow-source "$ORIGIN/" \
  >> "$OUT/serve.out" 2>> "$OUT/serve.log" &
HOOK_PID=$!
PIDS+=("$HOOK_PID")
wait_http "$HOOK/healthz"

log "warm one media URL"
URL="$HOOK/insecure/pr:ios/plain/$ORIGIN/banner.webp@jpg"
curl -fsS -o "$OUT/warm.jpg" "$URL"
MEDIA=$(ls "$OUT/store" | grep '\.jpg$' | while read -r f; do cmp -s "$OUT/store/$f" "$OUT/warm.jpg" && echo "$f"; done | head -1 || true)
[[ -n $MEDIA ]] || die "the warmed file is not in the store"
MEDIA_BYTES=$(stat -c %s "$OUT/store/$MEDIA")
LARGE_URL="$HOOK/insecure/pr:ios/plain/$ORIGIN/photo-12mp.jpg@jpg"
curl -fsS -o "$OUT/warm-large.jpg" "$LARGE_URL"
LARGE=$(ls "$OUT/store" | grep '\.jpg$' | while read -r f; do cmp -s "$OUT/store/$f" "$OUT/warm-large.jpg" && echo "$f"; done | head -1 || true)
[[ -n $LARGE ]] || die "the large warmed file is not in the store"
LARGE_BYTES=$(stat -c %s "$OUT/store/$LARGE")
NGINX_PORT=$(free_port)
PIDS+=("$(start_nginx "$OUT/nginx" "$OUT/store" "$NGINX_PORT")")
# The same work as the hook: one access-log line per request, written to a file.
sed -i "s|access_log off;|access_log $OUT/nginx/access.log;|" "$OUT/nginx/nginx.conf"
# Its pid file, before the signal: `kill 0` would signal this script's own process group.
for _ in $(seq 100); do [[ -s $OUT/nginx/nginx.pid ]] && break; sleep 0.05; done
[[ -s $OUT/nginx/nginx.pid ]] || die "nginx wrote no pid file"
kill -HUP "$(cat "$OUT/nginx/nginx.pid")"
wait_http "http://127.0.0.1:$NGINX_PORT/$MEDIA"

pass() { # NAME PID URL: one wrk pass; the server's CPU per request
  local name=$1 pid=$2 url=$3 c0 c1
  c0=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --timeout 30s --latency "$url" > "$OUT/$name.wrk.txt" 2>&1 || true
  c1=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  python3 - "$OUT" "$name" "$c0" "$c1" <<'PY'
import json, re, sys
out, name, c0, c1 = sys.argv[1:5]
text = open(f"{out}/{name}.wrk.txt").read()
def ms(v, unit): return float(v) * {"us": 1e-3, "ms": 1, "s": 1e3}[unit]
requests = int(re.search(r"(\d+) requests in", text).group(1))
non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
r = {"name": name, "req_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
     "p50_ms": ms(*re.search(r"50%\s+([\d.]+)(us|ms|s)", text).groups()),
     "p99_ms": ms(*re.search(r"99%\s+([\d.]+)(us|ms|s)", text).groups()),
     "requests": requests, "errors": non2xx + sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text)),
     "server_cpu_us_per_request": round((float(c1) - float(c0)) * 1e6 / max(1, requests), 1)}
json.dump(r, open(f"{out}/{name}.json", "w"))
print(f"  {name}: {r['req_per_s']:.0f} req/s, p99 {r['p99_ms']:.2f} ms, {r['server_cpu_us_per_request']} CPU-µs/request, "
      f"errors {r['errors']}", file=sys.stderr)
PY
}

log "wrk: $CONNECTIONS connections, ${SECONDS_EACH}s each ($MEDIA_BYTES bytes)"
pass url_cached "$HOOK_PID" "$URL"
pass nginx_file "$(cat "$OUT/nginx/nginx.pid")" "http://127.0.0.1:$NGINX_PORT/$MEDIA"
pass url_cached_again "$HOOK_PID" "$URL"
pass nginx_file_again "$(cat "$OUT/nginx/nginx.pid")" "http://127.0.0.1:$NGINX_PORT/$MEDIA"
# The media URL beside its floor, the same file through /media/<name>, in PAIRS pairs whose order
# alternates (the server warmed by the passes above), for the small and the large file; each pair
# gives a ratio, and the median of them is the result.
for ((i = 1; i <= PAIRS; i++)); do
  log "pair $i of $PAIRS: the small file ($MEDIA_BYTES bytes), then the large one ($LARGE_BYTES bytes)"
  if ((i % 2)); then
    pass "media_$i" "$HOOK_PID" "$HOOK/media/$MEDIA"; pass "url_$i" "$HOOK_PID" "$URL"
    pass "media_large_$i" "$HOOK_PID" "$HOOK/media/$LARGE"; pass "url_large_$i" "$HOOK_PID" "$LARGE_URL"
  else
    pass "url_$i" "$HOOK_PID" "$URL"; pass "media_$i" "$HOOK_PID" "$HOOK/media/$MEDIA"
    pass "url_large_$i" "$HOOK_PID" "$LARGE_URL"; pass "media_large_$i" "$HOOK_PID" "$HOOK/media/$LARGE"
  fi
done
# For reference: the hook's floor (a route that does nothing).
pass healthz "$HOOK_PID" "$HOOK/healthz"

log "cold: $COLD_ITEMS items × $ROUNDS rounds, a media URL and /v1/process in turn"
python3 - "$OUT" "$HOOK" "$ORIGIN" "$COLD_ITEMS" "$ROUNDS" <<'PY'
import json, sys, time, urllib.request
out, hook, origin, items, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def timed(request):
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as r:
        body = r.read()
        status = r.status
    return time.monotonic() - started, status, body
results = {"url": [], "process": [], "process_only": []}
n = 0
for item in range(items):
    best = {"url": 1e9, "process": 1e9, "process_only": 1e9}
    for round_ in range(rounds):
        order = ["url", "process"] if (item + round_) % 2 == 0 else ["process", "url"]
        for kind in order:
            source = f"{origin}/cold-{n}.jpg"
            n += 1
            if kind == "url":
                seconds, status, body = timed(f"{hook}/insecure/pr:ios/plain/{source}@jpg")
                assert status == 200 and body[:3] == b"\xff\xd8\xff", status
                best["url"] = min(best["url"], seconds)
            else:
                payload = json.dumps({"aps": {"alert": {"title": "Bench", "body": "cold"}, "mutable-content": 1},
                                      "media_url": source}).encode()
                request = urllib.request.Request(f"{hook}/v1/process", data=payload,
                                                 headers={"Content-Type": "application/json"})
                seconds, status, body = timed(request)
                answer = json.loads(body)
                assert answer["outcome"]["status"] == "processed", answer["outcome"]
                download, status, body = timed(answer["payload"]["media_url"])
                assert status == 200 and body[:3] == b"\xff\xd8\xff"
                best["process_only"] = min(best["process_only"], seconds)
                best["process"] = min(best["process"], seconds + download)
    for kind in best:
        results[kind].append(best[kind])
summary = {kind: round(sorted(values)[len(values) // 2] * 1000, 1) for kind, values in results.items()}
json.dump({"cold_median_ms": summary, "cold_ms": results}, open(f"{out}/cold.json", "w"), indent=1)
print(f"  cold medians: media URL {summary['url']} ms, /v1/process + download {summary['process']} ms "
      f"(/v1/process alone {summary['process_only']} ms)", file=sys.stderr)
PY

python3 - "$OUT" "$MEDIA_BYTES" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$LARGE_BYTES" \
  "$PAIRS" <<'PY'
import json, statistics, sys
out, media_bytes, commit, large_bytes, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
names = ["url_cached", "nginx_file", "url_cached_again", "nginx_file_again"]
for i in range(1, pairs + 1):
    names += [f"media_{i}", f"url_{i}", f"media_large_{i}", f"url_large_{i}"] if i % 2 else \
        [f"url_{i}", f"media_{i}", f"url_large_{i}", f"media_large_{i}"]
names.append("healthz")
r = {n: json.load(open(f"{out}/{n}.json")) for n in names}
cpu = {n: p["server_cpu_us_per_request"] for n, p in r.items()}
small_pairs = [round(cpu[f"url_{i}"] / cpu[f"media_{i}"], 3) for i in range(1, pairs + 1)]
large_pairs = [round(cpu[f"url_large_{i}"] / cpu[f"media_large_{i}"], 3) for i in range(1, pairs + 1)]
small, large = statistics.median(small_pairs), statistics.median(large_pairs)
cold = json.load(open(f"{out}/cold.json"))["cold_median_ms"]
first = r["url_cached"]["req_per_s"] / r["nginx_file"]["req_per_s"]
second = r["url_cached_again"]["req_per_s"] / r["nginx_file_again"]["req_per_s"]
summary = {"commit": commit, "media_bytes": media_bytes, "passes": r, "cold_median_ms": cold,
           "ratios": {"cached media URL / nginx (req/s), two rounds": [round(first, 3), round(second, 3)],
                      "cold media URL / (/v1/process + download)": round(cold["url"] / cold["process"], 3),
                      "cached media URL / /media (CPU per request), small file, each pair": small_pairs,
                      "cached media URL / /media (CPU per request), large file, each pair": large_pairs,
                      "cached media URL / /media (CPU per request), small and large file, median of pairs":
                          [small, large]}}
json.dump(summary, open(f"{out}/results.json", "w"), indent=1)
print("\n| pass | req/s | p50 ms | p99 ms | server CPU-µs/request | errors |\n|---|---:|---:|---:|---:|---:|")
for n, p in r.items():
    print(f"| {n} | {p['req_per_s']:,.0f} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} | {p['server_cpu_us_per_request']} | {p['errors']} |")
print(f"\n- cached media URL / nginx serving the file: {first:.2f}, {second:.2f}")
print(f"- cold 12 MP JPEG, median of best-of-rounds: media URL {cold['url']} ms, /v1/process + download "
      f"{cold['process']} ms (alone {cold['process_only']} ms): ratio {cold['url'] / cold['process']:.2f}")
print(f"- cached media URL / GET /media of the same file, server CPU per request, median of {pairs} pairs: "
      f"{small:.2f} ({media_bytes:,} bytes; pairs {small_pairs}), {large:.2f} ({large_bytes:,} bytes; pairs {large_pairs})")
print(f"- commit {commit}, files {media_bytes:,} and {large_bytes:,} bytes")
PY
