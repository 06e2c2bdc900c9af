#!/usr/bin/env bash
# Builds PushMedia's container image from the Containerfile, tagged IMAGE
# (localhost/pushmedia:<version>, and :latest).
#   scripts/image.sh             # the image's root around the binary in .build-static/stage
#                                # (`--target prebuilt`; run scripts/release-static.sh first)
#                                # and the `media` stage (libvips, FFmpeg; cached after once)
#   scripts/image.sh --full      # the whole Containerfile, the compile stage included
#   scripts/image.sh --debian    # the stand-in around the prebuilt binary and Debian's own
#                                # libvips, FFmpeg and libcurl (`--target prebuilt-debian`: no
#                                # `media` stage; what `make test` checks until `media` is built)
#   scripts/image.sh --prepare   # only what needs no binary, ahead of a test: the base image,
#                                # and when `media` is not built here, the Debian libraries'
#                                # stage (`--target media-debian`), left in podman's cache
# With podman (the default), on a machine that reaches no registry: the base images are made
# here (scripts/container-env.sh): localhost/debian:bookworm-slim with debootstrap, and for
# --full localhost/swift:6.3-bookworm from this machine's toolchain; they are passed as the
# DEBIAN_IMAGE and SWIFT_IMAGE build arguments. With ENGINE=docker: `docker build` with the
# Containerfile's own public images (docker.io's debian:bookworm-slim and swift:6.3-bookworm).
# Prints the build's duration and the image's size.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/container-env.sh

FULL=0
DEBIAN=0
PREPARE=0
for argument in "$@"; do
  case $argument in
    --full) FULL=1 ;;
    --debian) DEBIAN=1 ;;
    --prepare) PREPARE=1 ;;
    *) echo "usage: scripts/image.sh [--full|--debian|--prepare]" >&2; exit 64 ;;
  esac
done

ENGINE=${ENGINE:-podman}
VERSION=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/PushMedia/Support/Version.swift)
IMAGE=${IMAGE:-localhost/pushmedia:$VERSION}
STAGE=${PUSHMEDIA_STATIC_BUILD:-.build-static}/stage

args=(-f Containerfile -t "$IMAGE" -t "${IMAGE%:*}:latest")
if [ "$ENGINE" = podman ]; then
  # Ahead of a test, a machine without a working podman is the image test's to report.
  container_setup || { log "$CONTAINER_PROBLEM"; exit $((1 - PREPARE)); }
  ensure_base_image
  # docker format: OCI images have no HEALTHCHECK.
  args+=(--format docker --pull=never --build-arg "DEBIAN_IMAGE=$BASE_IMAGE")
  if [ "$FULL" = 1 ]; then
    ensure_swift_image
    args+=(--build-arg "SWIFT_IMAGE=$SWIFT_IMAGE")
    # The stand-in's git rewrites github.com to the mirrors folder; mount it for the build.
    [ -d "$SWIFT_PACKAGE_MIRRORS" ] && args+=(-v "$SWIFT_PACKAGE_MIRRORS:$SWIFT_PACKAGE_MIRRORS:ro")
  fi
fi

if [ "$PREPARE" = 1 ]; then
  [ "$ENGINE" = podman ] || exit 0
  podman image exists "$(media_image)" && exit 0
  # The same files as the image's own context holds for that stage, so the build that follows
  # finds its layers in the cache.
  context=$CACHE/prepare-context
  mkdir -p "$CACHE"
  rm -rf "$context"
  mkdir -p "$context/packaging"
  cp -a packaging/image "$context/packaging/image"
  start=$(now)
  if ! $ENGINE build -f Containerfile --format docker --pull=never --build-arg "DEBIAN_IMAGE=$BASE_IMAGE" \
    --target media-debian "$context" >"$CACHE/image-prepare.log" 2>&1; then
    tail -40 "$CACHE/image-prepare.log" >&2
    log "FAILED: the Debian libraries' stage (whole log: $CACHE/image-prepare.log)"
    exit 1
  fi
  log "the Debian libraries' stage built in $(since "$start") s"
  exit 0
fi

if [ "$FULL" = 1 ]; then
  context=.
else
  [ -x "$STAGE/pushmedia" ] || { log "$STAGE/pushmedia is missing: run scripts/release-static.sh first"; exit 1; }
  if [ "$DEBIAN" = 1 ]; then args+=(--target prebuilt-debian); else args+=(--target prebuilt); fi
  # The context: the staged binary (hard links, no copy) and the root's assembly script.
  context=$CACHE/image-context
  rm -rf "$context"
  mkdir -p "$context/packaging"
  cp -al "$STAGE" "$context/stage" 2>/dev/null || cp -a "$STAGE" "$context/stage"
  cp -a packaging/image "$context/packaging/image"
fi

mkdir -p "$CACHE"
old=$($ENGINE image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
start=$(now)
log "$ENGINE build ${args[*]} $context"
if ! $ENGINE build "${args[@]}" "$context" >"$CACHE/image-build.log" 2>&1; then
  tail -40 "$CACHE/image-build.log" >&2
  log "FAILED: the image build (whole log: $CACHE/image-build.log)"
  exit 1
fi
seconds=$(since "$start")
# The `media` stage just built (or found in the cache) gets its name, for scripts/image-test.sh.
if [ "$ENGINE" = podman ] && [ "$DEBIAN" = 0 ]; then
  $ENGINE build -f Containerfile --format docker --pull=never --build-arg "DEBIAN_IMAGE=$BASE_IMAGE" \
    --target media -t "$(media_image)" "$context" >>"$CACHE/image-build.log" 2>&1 ||
    log "could not name the media stage (it is built again next time)"
fi
new=$($ENGINE image inspect --format '{{.Id}}' "$IMAGE")
# The image this build replaced, when nothing else names it any more.
if [ -n "$old" ] && [ "$old" != "$new" ] && [ "$($ENGINE image inspect --format '{{len .RepoTags}}' "$old" 2>/dev/null)" = 0 ]; then
  $ENGINE rmi "$old" >/dev/null 2>&1 || true
fi
size=$($ENGINE image inspect --format '{{.Size}}' "$IMAGE")
log "built $IMAGE ($([ "$FULL" = 1 ] && echo "whole Containerfile" || echo "prebuilt binary")$([ "$DEBIAN" = 1 ] && echo ", Debian's libraries")) in $seconds s, $((size / 1000000)) MB"
