#!/usr/bin/env bash
# One item for the vipsthumbnail contenders (run by xargs -P 2 from bench/run.sh):
#   vips_item.sh MODE OUT_DIR SOURCE
# MODE fetch:  curl SOURCE (a URL) to a temp file, then vipsthumbnail: fit 2048x2048 (shrink
#              only), JPEG Q 82, no metadata. The floor: the same work as the other contenders.
# MODE local:  vipsthumbnail on SOURCE (a path) directly: decode + resize + encode only.
# Local variants, to split PushMedia's extra image work into its parts (no fetch):
#   local_opt    + optimize_coding
#   local_srgb   + optimize_coding + export profile sRGB (an lcms transform, as PushMedia asks)
#   local_x2     local_srgb + a 512 px thumbnail decoded from the source again (PushMedia today)
#   local_chain  local_srgb + the 512 px thumbnail made from the 2048 px output instead
# MODE equiv:  like fetch, plus what PushMedia also does per image: optimize_coding on the
#              attachment and a second 512 px JPEG thumbnail decoded from the source again.
set -euo pipefail
mode=$1 out=$2 src=$3
name=$(basename "${src%%\?*}")
name=${name%.*}
case $mode in
  local)
    vipsthumbnail "$src" -s '2048x2048>' -o "$out/$name.jpg[Q=82,strip]"
    ;;
  local_opt)
    vipsthumbnail "$src" -s '2048x2048>' -o "$out/$name.jpg[Q=82,strip,optimize_coding]"
    ;;
  local_srgb)
    vipsthumbnail "$src" -s '2048x2048>' -e srgb -o "$out/$name.jpg[Q=82,strip,optimize_coding]"
    ;;
  local_x2)
    vipsthumbnail "$src" -s '512x512>' -e srgb -o "$out/$name.thumb.jpg[Q=82,strip,optimize_coding]"
    vipsthumbnail "$src" -s '2048x2048>' -e srgb -o "$out/$name.jpg[Q=82,strip,optimize_coding]"
    ;;
  local_chain)
    vipsthumbnail "$src" -s '2048x2048>' -e srgb -o "$out/$name.jpg[Q=82,strip,optimize_coding]"
    vipsthumbnail "$out/$name.jpg" -s '512x512>' -o "$out/$name.thumb.jpg[Q=82,strip,optimize_coding]"
    ;;
  fetch|equiv)
    tmp=$(mktemp -p "$out" .in.XXXXXX)
    trap 'rm -f "$tmp"' EXIT
    curl -sSf --max-time 120 -o "$tmp" "$src"
    if [[ $mode == fetch ]]; then
      vipsthumbnail "$tmp" -s '2048x2048>' -o "$out/$name.jpg[Q=82,strip]"
    else
      vipsthumbnail "$tmp" -s '512x512>' -e srgb -o "$out/$name.thumb.jpg[Q=82,strip,optimize_coding]"
      vipsthumbnail "$tmp" -s '2048x2048>' -e srgb -o "$out/$name.jpg[Q=82,strip,optimize_coding]"
    fi
    ;;
  *) echo "vips_item.sh: unknown mode $mode" >&2; exit 64 ;;
esac
mkdir -p "$out/.cpu"
times > "$out/.cpu/$(basename "${src%%\?*}")"  # line 1: this shell, line 2: its children
