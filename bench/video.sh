#!/usr/bin/env bash
# Video work beside its floor, the same ffmpeg command lines run directly, in one run:
#   transcode_pm     pushmedia process of a payload naming a 1-minute 1080p VP9/Opus WebM (iOS:
#                    transcoded to H.264/AAC MP4, 1280 px, plus the poster frame as thumbnail)
#   transcode_ffmpeg the ffmpeg transcode command PushMedia runs, alone (the floor)
#   poster_pm        pushmedia process --profile android of a 1-minute 1080p H.264 MP4 (poster only)
#   poster_ffmpeg    one ffmpeg frame extraction of it, alone
#
#   bench/video.sh        SECONDS_LONG=60 ROUNDS=2
#
# Prints a table (best round of each) and writes bench/out/video/results.json.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/video"
SECONDS_LONG=${SECONDS_LONG:-60}
ROUNDS=${ROUNDS:-2}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"

command -v ffmpeg >/dev/null || "$ROOT/scripts/setup.sh"
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
mkdir -p "$OUT/clips" "$OUT/results"
rm -f "$OUT/results/"*.json

log "clips: ${SECONDS_LONG} s of 1080p30"
[[ -s $OUT/clips/long.webm ]] || ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=1920x1080:r=30:d=$SECONDS_LONG" \
  -f lavfi -i "sine=f=440:d=$SECONDS_LONG" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 3M -c:a libopus -y "$OUT/clips/long.webm"
[[ -s $OUT/clips/long.mp4 ]] || ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=1920x1080:r=30:d=$SECONDS_LONG" \
  -c:v libx264 -preset veryfast -b:v 3M -pix_fmt yuv420p -y "$OUT/clips/long.mp4"
for clip in long.webm long.mp4; do
  printf '{"aps":{"alert":{"title":"Bench","body":"video"},"mutable-content":1},"media_url":"%s"}\n' "$clip" > "$OUT/clips/${clip%.*}-${clip#*.}.json"
done

M() { python3 "$BENCH/measure.py" run "$@"; }
for ((round = 1; round <= ROUNDS; round++)); do
  log "round $round of $ROUNDS"
  rm -rf "$OUT/store"
  M --name transcode_pm --tree --items 1 --out "$OUT/results/transcode_pm.$round.json" --stdout "$OUT/pm.json" --stderr "$OUT/pm.err" -- \
    "$BIN" process "$OUT/clips/long-webm.json" --store "$OUT/store" --media-root "$OUT/clips" --budget 600s
  grep -q "processed" "$OUT/pm.err" || die "transcode_pm: not processed: $(cat "$OUT/pm.err")"
  M --name transcode_ffmpeg --items 1 --out "$OUT/results/transcode_ffmpeg.$round.json" --stderr /dev/null -- \
    ffmpeg -nostdin -hide_banner -loglevel error -threads 2 -i "$OUT/clips/long.webm" -map 0:v:0 -map '0:a:0?' -sn -dn \
    -vf "scale=w='min(iw,1280)':h='min(ih,1280)':force_original_aspect_ratio=decrease:force_divisible_by=2" \
    -c:v libx264 -preset veryfast -profile:v high -pix_fmt yuv420p -b:v 4000000 -maxrate 4000000 -bufsize 8000000 \
    -c:a aac -b:a 96000 -ac 2 -movflags +faststart -map_metadata -1 -f mp4 -y "$OUT/floor.mp4"
  rm -rf "$OUT/store"
  M --name poster_pm --tree --items 1 --out "$OUT/results/poster_pm.$round.json" --stdout /dev/null --stderr "$OUT/poster.err" -- \
    "$BIN" process "$OUT/clips/long-mp4.json" --store "$OUT/store" --media-root "$OUT/clips" --budget 600s --profile android
  grep -q "processed" "$OUT/poster.err" || die "poster_pm: not processed: $(cat "$OUT/poster.err")"
  M --name poster_ffmpeg --items 1 --out "$OUT/results/poster_ffmpeg.$round.json" --stderr /dev/null -- \
    ffmpeg -nostdin -hide_banner -loglevel error -threads 1 -ss "$((SECONDS_LONG / 10))" -i "$OUT/clips/long.mp4" -map 0:v:0 -an \
    -frames:v 1 -vf "scale=w='min(iw,1440)':h='min(ih,1440)':force_original_aspect_ratio=decrease" -c:v png -f image2 -y "$OUT/floor.png"
done

python3 - "$OUT" "$SECONDS_LONG" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import glob, json, sys
out, seconds, commit = sys.argv[1], float(sys.argv[2]), sys.argv[3]
runs = {}
for path in glob.glob(f"{out}/results/*.json"):
    r = json.load(open(path)); runs.setdefault(r["name"], []).append(r)
best = {n: min(rs, key=lambda r: r["wall_s"]) for n, rs in runs.items()}
rows = {}
print(f"\n| pass | wall s | CPU-s | s per minute of video | peak RSS MB |\n|---|---:|---:|---:|---:|")
for n in ["transcode_pm", "transcode_ffmpeg", "poster_pm", "poster_ffmpeg"]:
    r = best[n]
    rows[n] = dict(wall_s=r["wall_s"], cpu_s=r["cpu_s"], peak_rss_mb=r["peak_rss_mb"])
    per_minute = f"{r['wall_s'] * 60 / seconds:.1f}" if n.startswith("transcode") else "–"
    print(f"| {n} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {per_minute} | {r['peak_rss_mb']:.0f} |")
ratios = {"transcode wall": best["transcode_pm"]["wall_s"] / best["transcode_ffmpeg"]["wall_s"],
          "transcode CPU": best["transcode_pm"]["cpu_s"] / best["transcode_ffmpeg"]["cpu_s"],
          "poster CPU": best["poster_pm"]["cpu_s"] / best["poster_ffmpeg"]["cpu_s"]}
for k, v in ratios.items(): print(f"- PushMedia / ffmpeg alone, {k}: {v:.2f}")
print(f"- commit {commit}")
json.dump({"commit": commit, "seconds": seconds, "rows": rows, "ratios": ratios}, open(f"{out}/results.json", "w"), indent=1)
PY
