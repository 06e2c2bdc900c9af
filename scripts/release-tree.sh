# Sourced by scripts/release-static.sh and scripts/test.sh: the release-mode build folders.
#
# Three builds share one build of the dependencies: the binary that ships (`plain`), and the
# package's own modules again, instrumented and unoptimised, for AddressSanitizer (`asan`) and
# ThreadSanitizer (`tsan`); Package.swift's PUSHMEDIA_SANITIZE and PUSHMEDIA_STATIC_STDLIB
# change the package's own targets and `pushmedia`'s link, never a dependency's compile command.
# SwiftPM's compile commands name the build folder, so the three trees take turns at one path,
# $RELEASE_TREE (its file `variant` says whose it is); the others wait beside it, parked under
# their names, where their tests and programs still run. A tree that does not exist yet starts
# as a copy of another: only the package's own modules are compiled again.
#   .build-static/tree            the tree in place (`swift build --scratch-path`)
#   .build-static/{plain,asan,tsan}   the parked ones
#   .build-static/stage           the binary that ships, staged (scripts/release-static.sh)
RELEASE_BUILDS=${PUSHMEDIA_STATIC_BUILD:-.build-static}
RELEASE_TREE=$RELEASE_BUILDS/tree
# The flags every release-mode build uses: another set would rebuild the dependencies.
RELEASE_FLAGS=(-c release -debug-info-format none --scratch-path "$RELEASE_TREE")

# Makes VARIANT's tree the one at $RELEASE_TREE: `use_tree VARIANT`. Callers hold the lock
# (`lock_trees`) until they are done with it.
use_tree() {
  local want=$1 current="" source=""
  mkdir -p "$RELEASE_BUILDS"
  # The folders of an older layout (a debug build per sanitizer, and a release build of its own
  # at $RELEASE_BUILDS itself).
  rm -rf .build-sanitizer .build-asan .build-tsan
  if [ -e "$RELEASE_BUILDS/workspace-state.json" ]; then
    find "$RELEASE_BUILDS" -mindepth 1 -maxdepth 1 ! -name lock ! -name stage ! -name deb ! -name products \
      ! -name tree ! -name plain ! -name asan ! -name tsan -exec rm -rf {} +
  fi
  [ -d "$RELEASE_TREE" ] && current=$(cat "$RELEASE_TREE/variant" 2>/dev/null || echo unknown)
  [ "$current" = "$want" ] && return 0
  # A tree that says nothing of itself may be half of anything: built again.
  if [ "$current" = unknown ]; then
    rm -rf "$RELEASE_TREE"
  elif [ -n "$current" ]; then
    rm -rf "${RELEASE_BUILDS:?}/$current"
    mv "$RELEASE_TREE" "$RELEASE_BUILDS/$current"
  fi
  if [ -f "$RELEASE_BUILDS/$want/variant" ]; then
    mv "$RELEASE_BUILDS/$want" "$RELEASE_TREE"
    return 0
  fi
  rm -rf "${RELEASE_BUILDS:?}/$want"
  for source in "$current" plain asan tsan; do
    [ -n "$source" ] && [ -f "$RELEASE_BUILDS/$source/variant" ] && break
    source=""
  done
  if [ -n "$source" ]; then
    # What an interrupted copy left.
    rm -rf "$RELEASE_TREE.tmp"
    cp -a --reflink=auto "$RELEASE_BUILDS/$source" "$RELEASE_TREE.tmp"
    mv "$RELEASE_TREE.tmp" "$RELEASE_TREE"
  fi
  mkdir -p "$RELEASE_TREE"
  echo "$want" >"$RELEASE_TREE/variant"
}

# Moves the tree in place to its parked name, so that another can be built while its tests run:
# `park_tree`, under the lock; prints the parked folder.
park_tree() {
  local current
  current=$(cat "$RELEASE_TREE/variant")
  rm -rf "${RELEASE_BUILDS:?}/$current"
  mv "$RELEASE_TREE" "$RELEASE_BUILDS/$current"
  echo "$RELEASE_BUILDS/$current"
}

# One user of the trees at a time: `lock_trees` takes the lock on descriptor 8 until the
# calling shell exits.
lock_trees() {
  mkdir -p "$RELEASE_BUILDS"
  exec 8>"$RELEASE_BUILDS/lock"
  flock 8
}
