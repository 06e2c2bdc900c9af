#!/usr/bin/env bash
# The binary that the Debian package and the container image ship, built once for both:
# `swift build -c release --product pushmedia --static-swift-stdlib` (the Swift runtime and
# Foundation linked in, so only Debian's libvips, libmagic, libcurl, libnghttp2 and libc are
# needed at run time) in its own build folder, .build-static, which leaves `make release`'s
# build in .build alone. The result is staged with its resource bundle (openapi.yaml, found
# beside the binary) and without debug information (symbols stay, for crash backtraces):
#   .build-static/stage/pushmedia
#   .build-static/stage/PushMedia_PushMediaServer.resources/
# It is built without debug information (`-debug-info-format none`): the staged binary is
# stripped of it anyway, and not making it saves about an eighth of the build. A rebuild with
# nothing changed takes seconds; from scratch, beside `make test`'s other builds, about 40 minutes
# on 2 cores.
#   scripts/release-static.sh
#   scripts/release-static.sh --product relay-standin   # another product of the package, built
#                                   # the same way in the same folder; prints its path
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SCRATCH=${PUSHMEDIA_STATIC_BUILD:-.build-static}
STAGE=$SCRATCH/stage
BUNDLE=PushMedia_PushMediaServer.resources

# The same flags for every product built here: another set would rebuild the whole folder.
build=(build -c release --static-swift-stdlib -debug-info-format none --scratch-path "$SCRATCH")

if [ "${1:-}" = --product ] && [ -n "${2:-}" ]; then
  mkdir -p "$SCRATCH"
  $SWIFT "${build[@]}" --product "$2" >"$SCRATCH/build-$2.log" 2>&1 || { cat "$SCRATCH/build-$2.log" >&2; exit 1; }
  echo "$($SWIFT "${build[@]}" --show-bin-path)/$2"
  exit 0
fi
[ $# = 0 ] || { echo "usage: scripts/release-static.sh [--product NAME]" >&2; exit 64; }

start=$(date +%s)
$SWIFT "${build[@]}" --product pushmedia
bin=$($SWIFT "${build[@]}" --show-bin-path)

rm -rf "$STAGE.tmp"
mkdir -p "$STAGE.tmp"
strip --strip-debug -o "$STAGE.tmp/pushmedia" "$bin/pushmedia"
cp -R "$bin/$BUNDLE" "$STAGE.tmp/$BUNDLE"

# No Swift library may be left to load at run time.
if ldd "$STAGE.tmp/pushmedia" | grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime|_FoundationICU'; then
  echo "release-static: the binary still needs the Swift libraries above" >&2
  exit 1
fi
"$STAGE.tmp/pushmedia" --version >/dev/null
rm -rf "$STAGE"
mv "$STAGE.tmp" "$STAGE"
echo "release-static: $STAGE/pushmedia ($(du -m "$STAGE/pushmedia" | cut -f1) MB) in $(($(date +%s) - start)) s"
