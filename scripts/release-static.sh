#!/usr/bin/env bash
# The binary that the Debian package and the container image ship, built once for both:
# `swift build -c release --product pushmedia` with PUSHMEDIA_STATIC_STDLIB=1 (the Swift runtime
# and Foundation linked in, so only Debian's libvips, libmagic, libcurl, libnghttp2 and libc are
# needed at run time; see Package.swift), in the release-mode tree it shares with the sanitizer
# builds (scripts/release-tree.sh: .build-static/tree, parked as .build-static/plain), which
# leaves `make release`'s build in .build alone. The result is staged with its resource bundle
# (openapi.yaml, found beside the binary) and without debug information (symbols stay, for crash
# backtraces):
#   .build-static/stage/pushmedia
#   .build-static/stage/PushMedia_PushMediaServer.resources/
# It is built without debug information (`-debug-info-format none`): the staged binary is
# stripped of it anyway, and not making it saves about an eighth of the build. A rebuild with
# nothing changed takes seconds.
#   scripts/release-static.sh
#   scripts/release-static.sh --product relay-standin   # another product of the package, built
#                  # the same way, copied to .build-static/products/; prints its path
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
. scripts/release-tree.sh
STAGE=$RELEASE_BUILDS/stage
BUNDLE=PushMedia_PushMediaServer.resources
build=(build "${RELEASE_FLAGS[@]}")
unset PUSHMEDIA_SANITIZE
export PUSHMEDIA_STATIC_STDLIB=1
lock_trees
use_tree plain

if [ "${1:-}" = --product ] && [ -n "${2:-}" ]; then
  products=$RELEASE_BUILDS/products
  mkdir -p "$products"
  $SWIFT "${build[@]}" --product "$2" >"$products/build-$2.log" 2>&1 || { cat "$products/build-$2.log" >&2; exit 1; }
  cp "$($SWIFT "${build[@]}" --show-bin-path)/$2" "$products/$2.tmp"
  mv "$products/$2.tmp" "$products/$2"
  echo "$products/$2"
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
