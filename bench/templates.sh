#!/usr/bin/env bash
# A five-image CleverTap carousel beside each of its images alone, through the hook as shipped
# (`pushmedia serve`, default settings, its log written to a file):
#   single i    POST /v1/process of {"pt_id": "pt_carousel", "pt_img1": image i}: fetch, sniff,
#               decode, a 3:2 page within 86 KB, store, rewrite (a one-image plan gives the same
#               600×400 page as the five-image one: the same work and the same output)
#   carousel    POST /v1/process of the carousel of the five images
# The five images are different 12 MP JPEGs (the sample photo, flipped and tinted by FFmpeg); the
# origin (a Python server in its own process) answers each after DELAY_MS, as a CDN miss would.
# Every request is cold: a URL not seen before (a new query string each round). Per round the
# six requests run one after another in a shuffled order; medians over ROUNDS.
#   wall  carousel ÷ the slowest single image's (the goal: at most 1.3×)
#   CPU   the server's CPU for the carousel ÷ the sum of its five single images' (at most 1.1×)
#
#   bench/templates.sh      ROUNDS=7 DELAY_MS=300 BIN=.build-static/stage/pushmedia
#   SERVE_ARGS="--max-jobs 8" bench/templates.sh    a second row with a setting changed
# The origin's log (bench/out/templates/origin.log) has each request's arrival time.
#
# Writes bench/out/templates/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/templates"
ROUNDS=${ROUNDS:-7}
SERVE_ARGS=${SERVE_ARGS:-}
DELAY_MS=${DELAY_MS:-300}
BIN=${BIN:-"$ROOT/.build-static/stage/pushmedia"}
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

[[ -x $BIN ]] || die "no $BIN (scripts/release-static.sh builds it)"
rm -rf "$OUT" && mkdir -p "$OUT/media"

log "five 12 MP JPEGs"
filters=("null" "hflip" "vflip" "hue=h=60" "hflip,hue=h=200")
for i in "${!filters[@]}"; do
  ffmpeg -v error -y -i "$ROOT/samples/media/photo-exif.jpg" -vf "${filters[$i]}" -q:v 2 "$OUT/media/look$i.jpg"
done

ORIGIN_PORT=$(free_port)
python3 - "$OUT/media" "$ORIGIN_PORT" "$DELAY_MS" >"$OUT/origin.log" 2>&1 <<'PY' &
import http.server, os, sys, time
root, port, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) / 1000
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def do_GET(self):
        path = os.path.join(root, os.path.basename(self.path.split("?")[0]))
        if not os.path.isfile(path):
            self.send_error(404); return
        print(f"{time.time():.3f} {self.path}", flush=True)
        time.sleep(delay)
        body = open(path, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
PY
PIDS+=($!)
wait_http "http://127.0.0.1:$ORIGIN_PORT/look0.jpg"

HOOK_PORT=$(free_port)
# shellcheck disable=SC2086
"$BIN" serve --port "$HOOK_PORT" --store "$OUT/store" --allow-private-networks $SERVE_ARGS >"$OUT/serve.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
wait_http "http://127.0.0.1:$HOOK_PORT/healthz"

log "ROUNDS=$ROUNDS, origin delay ${DELAY_MS} ms, serve ${SERVE_ARGS:-as shipped}"
python3 - "$ORIGIN_PORT" "$HOOK_PORT" "$SERVER" "$OUT" "$ROUNDS" "${#filters[@]}" <<'PY'
import json, os, random, statistics, sys, time, urllib.request
origin, hook, server, out, rounds, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
tick = os.sysconf("SC_CLK_TCK")

def cpu():
    fields = open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick  # utime + stime, seconds

def post(images, tag):
    data = {"pt_id": "pt_carousel", "pt_title": "Spring", "pt_msg": "Five looks"}
    for n, i in enumerate(images, 1):
        data[f"pt_img{n}"] = f"http://127.0.0.1:{origin}/look{i}.jpg?r={tag}"
    request = urllib.request.Request(f"http://127.0.0.1:{hook}/v1/process?budget_ms=20000",
                                     data=json.dumps(data).encode(), headers={"Content-Type": "application/json"})
    before, started = cpu(), time.perf_counter()
    answer = json.load(urllib.request.urlopen(request, timeout=60))
    wall = time.perf_counter() - started
    time.sleep(0.2)  # the server's last work (the answer's log line) counted with this request
    used = cpu() - before
    media = answer["outcome"]["media"]
    assert len(media) == len(images) and all(m["status"] == "processed" and not m.get("cache_hit") for m in media), media
    sizes = {(m["attachment"]["width"], m["attachment"]["height"]) for m in media}
    return wall, used, sizes

walls = {k: [] for k in ["carousel"] + [f"single{i}" for i in range(count)]}
cpus = {k: [] for k in walls}
sizes = {}
for r in range(rounds):
    order = list(walls)
    random.shuffle(order)
    for kind in order:
        images = list(range(count)) if kind == "carousel" else [int(kind[6:])]
        wall, used, made = post(images, f"{r}-{kind}")
        walls[kind].append(wall)
        cpus[kind].append(used)
        sizes[kind] = made
med = lambda xs: statistics.median(xs)
singles = [k for k in walls if k != "carousel"]
slowest = max(med(walls[k]) for k in singles)
cpu_sum = sum(med(cpus[k]) for k in singles)
result = dict(rounds=rounds, wall_s={k: round(med(v), 3) for k, v in walls.items()},
              cpu_s={k: round(med(v), 3) for k, v in cpus.items()},
              wall_ratio=round(med(walls["carousel"]) / slowest, 3),
              cpu_ratio=round(med(cpus["carousel"]) / cpu_sum, 3),
              sizes={k: sorted(v) for k, v in sizes.items()})
json.dump(result, open(f"{out}/results.json", "w"), indent=1)
print("\n| request | wall s (median) | server CPU s (median) | pages made |\n|---|---:|---:|---|")
for k in walls:
    print(f"| {k} | {result['wall_s'][k]} | {result['cpu_s'][k]} | {', '.join(f'{w}×{h}' for w, h in result['sizes'][k])} |")
print(f"\nwall: carousel ÷ slowest single = {result['wall_ratio']:.3f} (goal ≤ 1.3)")
print(f"CPU:  carousel ÷ sum of singles = {result['cpu_ratio']:.3f} (goal ≤ 1.1)")
PY
