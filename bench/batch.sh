#!/usr/bin/env bash
# Batch throughput beside its floor, in one run, on the first ITEMS items of run.sh's corpus:
#   floor        the image work alone: vipsthumbnail over the local files (fit 2048, JPEG Q 82,
#                strip), CONCURRENCY processes, each given its share of the files
#   floor_opt    the floor with PushMedia's JPEG settings (optimize_coding on): the same encode
#   floor_curl   xargs -P CONCURRENCY: curl to a file, then one vipsthumbnail per file (each pays
#                a process start: an easier floor, kept for comparison)
#   pushmedia    pushmedia batch --concurrency CONCURRENCY (its 512 px thumbnail included)
#   nothumb      the same with --thumb-edge 0
#   decode_<N>   pushmedia with --decode-memory N, for each N in DECODE_MEMORY (choosing the default)
# Passes take turns, ROUNDS times; each pass's best round counts (this machine is noisy).
#
#   bench/batch.sh     ITEMS=60 ROUNDS=3 CONCURRENCY=2 DECODE_MEMORY="64000000 256000000 1000000000"
#   DECODE_MEMORY= bench/batch.sh     # no decode-memory passes
#
# Writes bench/out/batch/results.json and prints a table of ratios to the floor.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/batch"
ITEMS=${ITEMS:-60}
ROUNDS=${ROUNDS:-3}
CONCURRENCY=${CONCURRENCY:-2}
DECODE_MEMORY=${DECODE_MEMORY-"64000000 256000000 1000000000"}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
PY="$BENCH/.venv/bin/python"
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

log "tools and build"
command -v vipsthumbnail >/dev/null && command -v nginx >/dev/null || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvips-tools nginx-light >/dev/null
}
[[ -x $PY ]] || python3 -m venv "$BENCH/.venv"
"$PY" -c "import pyvips, PIL, pillow_heif" 2>/dev/null || "$BENCH/.venv/bin/pip" install -q pyvips Pillow pillow-heif
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  pkg-config --exists vips libcurl 2>/dev/null || "$ROOT/scripts/setup.sh"
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
rm -rf "$OUT"; mkdir -p "$OUT/results"

log "corpus ($ITEMS items) and origin"
CORPUS="$BENCH/out/corpus"
VIPS_CONCURRENCY=1 "$PY" "$BENCH/gen_corpus.py" "$CORPUS" --count "$ITEMS" --jobs 2
ORIGIN_PORT=$(free_port)
ORIGIN_PID=$(start_nginx "$OUT/origin" "$CORPUS" "$ORIGIN_PORT")
PIDS+=("$ORIGIN_PID")
wait_http "http://127.0.0.1:$ORIGIN_PORT/manifest.json"
python3 - "$CORPUS/manifest.json" "$ITEMS" "http://127.0.0.1:$ORIGIN_PORT" "$OUT" <<'PY'
import json, os, sys
items = json.load(open(sys.argv[1]))["items"][: int(sys.argv[2])]
out = sys.argv[4]
os.makedirs(f"{out}/payloads")
corpus = os.path.dirname(os.path.abspath(sys.argv[1]))
with open(f"{out}/urls.txt", "w") as urls, open(f"{out}/files.txt", "w") as files:
    for n, item in enumerate(items):
        url = f"{sys.argv[3]}/{item['name']}"
        urls.write(url + "\n")
        files.write(f"{corpus}/{item['name']}\n")
        with open(f"{out}/payloads/{n:03d}.json", "w") as f:
            json.dump({"aps": {"alert": {"title": "Bench", "body": f"Item {n}"}, "mutable-content": 1}, "media_url": url}, f)
PY
xargs -a "$OUT/urls.txt" -P "$CONCURRENCY" -n 1 curl -sSf -o /dev/null  # page cache

M() { python3 "$BENCH/measure.py" run --origin-pid "$ORIGIN_PID" "$@"; }
pm() { # NAME ROUND [batch flags...]
  local name=$1 round=$2; shift 2
  rm -rf "$OUT/run"; mkdir -p "$OUT/run"
  M --name "$name" --items "$ITEMS" --out "$OUT/results/$name.$round.json" --stdout /dev/null --stderr "$OUT/run/stderr.txt" -- \
    "$BIN" batch "$OUT/payloads" --out "$OUT/run/out" --store "$OUT/run/store" --allow-private-networks --budget 60s \
    --concurrency "$CONCURRENCY" "$@"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]["by_status"]; assert s.get("processed",0)+s.get("passthrough",0)==int(sys.argv[2]), s' \
    "$OUT/run/out/report.json" "$ITEMS" || die "$name: not every item was delivered"
}
floor_curl() { # ROUND
  rm -rf "$OUT/run"; mkdir -p "$OUT/run"
  VIPS_CONCURRENCY=1 M --name floor_curl --items "$ITEMS" --tree --out "$OUT/results/floor_curl.$1.json" --stderr /dev/null -- \
    xargs -a "$OUT/urls.txt" -P "$CONCURRENCY" -n 1 "$BENCH/vips_item.sh" fetch "$OUT/run"
}
# Each of CONCURRENCY vipsthumbnail processes converts every CONCURRENCY-th local file.
floor() { # NAME ROUND SAVE_OPTIONS
  rm -rf "$OUT/run"; mkdir -p "$OUT/run"
  split -n "r/$CONCURRENCY" "$OUT/files.txt" "$OUT/run/share."
  VIPS_CONCURRENCY=1 M --name "$1" --items "$ITEMS" --tree --out "$OUT/results/$1.$2.json" --stderr /dev/null -- \
    bash -c 'for share in "$1"/share.*; do xargs -a "$share" vipsthumbnail -s "2048x2048>" -o "$1/%s.jpg[$2]" & done; wait' \
    _ "$OUT/run" "$3"
}

for ((round = 1; round <= ROUNDS; round++)); do
  log "round $round of $ROUNDS"
  floor floor "$round" "Q=82,strip"
  floor floor_opt "$round" "Q=82,strip,optimize_coding"
  floor_curl "$round"
  pm pushmedia "$round"
  pm nothumb "$round" --thumb-edge 0
  for bytes in $DECODE_MEMORY; do pm "decode_$bytes" "$round" --decode-memory "$bytes"; done
done

python3 - "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import glob, json, os, sys
out, commit = sys.argv[1:3]
runs = {}
for path in glob.glob(f"{out}/results/*.json"):
    r = json.load(open(path))
    runs.setdefault(r["name"], []).append(r)
best = {name: max(rs, key=lambda r: r["items_per_s"]) for name, rs in runs.items()}
floor = best["floor"]
rows = []
print("\n| pass | best items/s | CPU-s/item | peak RSS MB | × floor items/s | × floor CPU/item | rounds (items/s) |\n|---|---:|---:|---:|---:|---:|---|")
for name in ["floor", "floor_opt", "floor_curl", "pushmedia", "nothumb"] + sorted(n for n in best if n.startswith("decode_")):
    r = best[name]
    ratio = r["items_per_s"] / floor["items_per_s"]
    cpu = r["cpu_s_per_item"] / floor["cpu_s_per_item"]
    rows.append(dict(name=name, items_per_s=r["items_per_s"], cpu_s_per_item=r["cpu_s_per_item"], peak_rss_mb=r["peak_rss_mb"],
                     vs_floor_items_per_s=round(ratio, 3), vs_floor_cpu_per_item=round(cpu, 3),
                     rounds=[x["items_per_s"] for x in runs[name]]))
    print(f"| {name} | {r['items_per_s']:.2f} | {r['cpu_s_per_item']:.3f} | {r['peak_rss_mb']:.0f} | {ratio:.2f} | {cpu:.2f} | "
          + ", ".join(f"{x['items_per_s']:.2f}" for x in runs[name]) + " |")
json.dump({"commit": commit, "rows": rows}, open(f"{out}/results.json", "w"), indent=1)
print(f"\ncommit {commit}")
PY
