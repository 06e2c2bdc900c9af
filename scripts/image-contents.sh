#!/usr/bin/env bash
# What the container image holds, read from the image itself (`podman export` of a container
# made from it, never started), as the table in docs/deployment.md between the
# `image-contents` markers: every program, shared library and data file, its size, and what it
# serves (packaging/image/libraries.txt for the libraries).
#   scripts/image-contents.sh IMAGE           print the table
#   scripts/image-contents.sh IMAGE --write   write it into docs/deployment.md
#   scripts/image-contents.sh IMAGE --check   fail when the image holds a library the table does
#                                             not name, the table names one the image does not
#                                             hold, or the image holds a forbidden library
#                                             (ImageMagick, poppler, X11, GL, LLVM, …) or a
#                                             package manager's files
# Sizes are not compared by --check: Debian's security updates change them.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${1:?usage: scripts/image-contents.sh IMAGE [--write|--check]}
MODE=${2:-print}
DOC=docs/deployment.md
BEGIN='<!-- image-contents: begin (scripts/image-contents.sh IMAGE --write) -->'
END='<!-- image-contents: end -->'
# Libraries and files that must never be in the image: what Debian's libvips42 and ffmpeg drag in.
FORBIDDEN='Magick|poppler|openslide|rsvg|libX|libxcb|SDL|pulse|libGL|libEGL|libgbm|libdrm|libva|libvdpau|/dri/|LLVM|cfitsio|matio|OpenEXR|Imath|fftw|flite|libcairo|libpango|/var/cache/apt|/var/lib/apt|/var/lib/dpkg|/usr/bin/apt|/usr/bin/dpkg|/bin/sh$|/bin/bash$'

container=$(podman create "$IMAGE" health)
trap 'podman rm -f -v "$container" >/dev/null 2>&1 || true' EXIT
# size, path of each regular file
files=$(podman export "$container" | tar -tvf - | awk '$1 ~ /^-/ { print $3 "\t/" $6 }' | sort -t$'\t' -k2)

reason() {
  local path=$1 name
  name=$(basename "$path")
  case $path in
    /usr/lib/pushmedia/pushmedia) echo "PushMedia (release, the Swift runtime and Foundation linked in, symbols stripped)" ;;
    /usr/lib/pushmedia/*) echo "PushMedia's resource bundle (the OpenAPI document)" ;;
    /usr/bin/ffmpeg) echo "FFmpeg's program, built here: video and audio transcodes, poster frames" ;;
    /usr/bin/ffprobe) echo "FFmpeg's program, built here: what a video or audio file holds" ;;
    /usr/bin/prlimit) echo "caps each FFmpeg child's memory (util-linux)" ;;
    /usr/lib/file/magic.mgc) echo "libmagic's database" ;;
    /etc/ssl/certs/ca-certificates.crt) echo "the CAs libcurl trusts (Debian's ca-certificates)" ;;
    /etc/passwd | /etc/group) echo "root and the user pushmedia (10001)" ;;
    /etc/nsswitch.conf) echo "name resolution: files, then DNS" ;;
    *.so | *.so.*) awk -F'\t' -v n="$name" '$1 == n { print $2 }' packaging/image/libraries.txt ;;
  esac
}

table() {
  local total=0 size path why
  echo "| file | size | what it serves |"
  echo "|---|---:|---|"
  while IFS=$'\t' read -r size path; do
    why=$(reason "$path")
    total=$((total + size))
    printf '| `%s` | %s | %s |\n' "$path" "$(awk -v s="$size" 'BEGIN { if (s >= 1048576) printf "%.1f MiB", s / 1048576; else printf "%d KiB", (s + 1023) / 1024 }')" "${why:-**not explained**}"
  done <<<"$files"
  echo
  echo "$(wc -l <<<"$files") files, $(awk -v s="$total" 'BEGIN { printf "%.1f MiB", s / 1048576 }') in all."
}

case $MODE in
  print) table ;;
  --write)
    generated=$(table)
    awk -v begin="$BEGIN" -v end="$END" -v body="$generated" '
      $0 == begin { print; print body; skip = 1; next }
      $0 == end { skip = 0 }
      !skip { print }' "$DOC" >"$DOC.tmp"
    grep -qF "$BEGIN" "$DOC.tmp" || { rm -f "$DOC.tmp"; echo "image-contents: $DOC has no '$BEGIN' line" >&2; exit 1; }
    mv "$DOC.tmp" "$DOC"
    echo "image-contents: wrote $(wc -l <<<"$files") files into $DOC"
    ;;
  --check)
    status=0
    image_names=$(cut -f2 <<<"$files" | sort)
    doc_names=$(awk -v begin="$BEGIN" -v end="$END" '$0 == begin { on = 1; next } $0 == end { on = 0 } on' "$DOC" |
      sed -n 's/^| `\([^`]*\)`.*/\1/p' | sort)
    extra=$(comm -23 <(echo "$image_names") <(echo "$doc_names"))
    gone=$(comm -13 <(echo "$image_names") <(echo "$doc_names"))
    [ -z "$extra" ] || { echo "image-contents: in the image, not in $DOC's list:" $extra >&2; status=1; }
    [ -z "$gone" ] || { echo "image-contents: in $DOC's list, not in the image:" $gone >&2; status=1; }
    unexplained=$(table | grep -F '**not explained**' || true)
    [ -z "$unexplained" ] || { echo "image-contents: files without a reason:" >&2; echo "$unexplained" >&2; status=1; }
    all=$(podman export "$container" | tar -tf - | sed 's|^|/|')
    forbidden=$(grep -E "$FORBIDDEN" <<<"$all" || true)
    [ -z "$forbidden" ] || { echo "image-contents: forbidden files in the image:" $forbidden >&2; status=1; }
    [ "$status" = 0 ] && echo "image-contents: the image's $(wc -l <<<"$files") files are the list's, none forbidden"
    exit "$status"
    ;;
  *) echo "usage: scripts/image-contents.sh IMAGE [--write|--check]" >&2; exit 64 ;;
esac
