#!/usr/bin/env bash
# Installs the system libraries PushMedia links against, when pkg-config cannot find them:
# libvips, libcurl, libmagic and libnghttp2 (the relays' HTTP/2), on Debian/Ubuntu through
# apt-get, and FFmpeg's programs (`ffmpeg`, `ffprobe`), which PushMedia runs as child processes
# for video poster frames.
# --test also installs what the test suite needs besides: Chromium (headless, for the tests
# that render report.html and /preview) and a font for it, when `chromium` is not on the PATH,
# and Python's venv (for Schemathesis, which scripts/api-conformance.sh installs from PyPI).
set -euo pipefail

TEST=0
for argument in "$@"; do
  case "$argument" in
    --test) TEST=1 ;;
    *) echo "usage: scripts/setup.sh [--test]" >&2; exit 64 ;;
  esac
done

missing() {
  ! command -v pkg-config >/dev/null 2>&1 && return 0
  ! pkg-config --exists vips libcurl libnghttp2 && return 0
  [ ! -f /usr/include/magic.h ] && ! pkg-config --exists libmagic 2>/dev/null && return 0
  return 1
}

PACKAGES=()
if missing; then PACKAGES+=(pkg-config libvips-dev libmagic-dev libcurl4-openssl-dev libnghttp2-dev); fi
if [ ! -x /usr/bin/ffmpeg ] || [ ! -x /usr/bin/ffprobe ]; then PACKAGES+=(ffmpeg); fi
if [ "$TEST" = 1 ] && ! command -v chromium >/dev/null 2>&1; then PACKAGES+=(chromium fonts-dejavu-core); fi
# GNU time, which measures a child's peak memory in the tests.
if [ "$TEST" = 1 ] && [ ! -x /usr/bin/time ]; then PACKAGES+=(time); fi
# Python's venv, for Schemathesis (scripts/api-conformance.sh installs it from PyPI).
if [ "$TEST" = 1 ] && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then PACKAGES+=(python3 python3-venv); fi

if [ "${#PACKAGES[@]}" -gt 0 ]; then
  echo "setup: installing ${PACKAGES[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: run as root or install sudo" >&2; exit 1; }
    SUDO=sudo
  fi
  command -v apt-get >/dev/null 2>&1 || { echo "setup: apt-get not found; install ${PACKAGES[*]} (or their equivalents)" >&2; exit 1; }
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
fi

command -v swift >/dev/null 2>&1 || { echo "setup: swift not found on PATH (Swift 6 toolchain required)" >&2; exit 1; }
if [ "$TEST" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || { echo "setup: chromium is still not on the PATH; the browser tests will fail" >&2; exit 1; }
fi
