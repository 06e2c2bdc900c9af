#!/usr/bin/env bash
# One cold request beside one vipsthumbnail run, on the same 12 MP JPEGs of the corpus:
#   vipsthumbnail   vipsthumbnail FILE -s '2048x2048>' -o out.jpg[Q=82,strip]: process start,
#                   decode, resize, encode (the floor of a single request)
#   pushmedia       POST /v1/process (budget 10 s) to a running `pushmedia serve`, the media on
#                   nginx on 127.0.0.1, a URL not seen before each time (a new query string):
#                   fetch, sniff, decode, attachment, 512 px thumbnail, store, rewrite
# Both take turns ROUNDS times per file; medians per file. The hook's own split comes from the
# answer's timings_ms.
#
#   bench/cold.sh      ROUNDS=5
#
# Writes bench/out/cold/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/cold"
ROUNDS=${ROUNDS:-5}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

command -v vipsthumbnail >/dev/null && command -v nginx >/dev/null || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvips-tools nginx-light >/dev/null
}
[[ -x $BIN ]] || die "no $BIN (bench/batch.sh builds it)"
CORPUS="$BENCH/out/corpus"
[[ -f $CORPUS/manifest.json ]] || die "no corpus (bench/batch.sh makes it)"
rm -rf "$OUT" && mkdir -p "$OUT/vips"

ORIGIN_PORT=$(free_port)
ORIGIN_PID=$(start_nginx "$OUT/origin" "$CORPUS" "$ORIGIN_PORT")
PIDS+=("$ORIGIN_PID")
wait_http "http://127.0.0.1:$ORIGIN_PORT/manifest.json"
HOOK_PORT=$(free_port)
"$BIN" serve --port "$HOOK_PORT" --store "$OUT/store" --allow-private-networks --log-level warning \
  >"$OUT/serve.out" 2>"$OUT/serve.err" &
PIDS+=($!)
wait_http "http://127.0.0.1:$HOOK_PORT/healthz"

python3 - "$CORPUS" "$ORIGIN_PORT" "$HOOK_PORT" "$OUT" "$ROUNDS" <<'PY'
import json, statistics, subprocess, sys, time, urllib.request
corpus, origin, hook, out, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
items = [i for i in json.load(open(f"{corpus}/manifest.json"))["items"]
         if i["name"].endswith(".jpg") and 11_000_000 <= i["width"] * i["height"] <= 13_000_000][:4]
rows = []
for item in items:
    vips, hook_ms, splits = [], [], []
    for n in range(rounds):
        started = time.perf_counter()
        subprocess.run(["vipsthumbnail", f"{corpus}/{item['name']}", "-s", "2048x2048>",
                        "-o", f"{out}/vips/%s.jpg[Q=82,strip]"], check=True)
        vips.append((time.perf_counter() - started) * 1000)
        payload = {"aps": {"alert": {"title": "Cold", "body": "One request"}, "mutable-content": 1},
                   "media_url": f"http://127.0.0.1:{origin}/{item['name']}?cold={n}"}
        request = urllib.request.Request(f"http://127.0.0.1:{hook}/v1/process?budget_ms=10000",
                                         data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
        started = time.perf_counter()
        answer = json.load(urllib.request.urlopen(request, timeout=30))
        hook_ms.append((time.perf_counter() - started) * 1000)
        outcome = answer["outcome"]
        assert outcome["status"] == "processed" and outcome["cache_hit"] is False, outcome
        splits.append(outcome["timings_ms"])
    median = lambda xs: statistics.median(xs)
    split = {k: round(median([s.get(k, 0) for s in splits]), 1) for k in splits[0]}
    rows.append(dict(file=item["name"], vipsthumbnail_ms=round(median(vips), 1), pushmedia_ms=round(median(hook_ms), 1),
                     ratio=round(median(hook_ms) / median(vips), 3), timings_ms=split))
json.dump(rows, open(f"{out}/results.json", "w"), indent=1)
print("\n| file | vipsthumbnail ms | pushmedia ms | × | pushmedia's timings_ms (median) |\n|---|---:|---:|---:|---|")
for r in rows:
    t = ", ".join(f"{k} {v}" for k, v in r["timings_ms"].items() if v)
    print(f"| {r['file']} | {r['vipsthumbnail_ms']} | {r['pushmedia_ms']} | {r['ratio']:.2f} | {t} |")
PY
