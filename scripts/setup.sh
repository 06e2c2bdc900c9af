#!/usr/bin/env bash
# Installs the system libraries PushMedia links against, when pkg-config cannot find them:
# libvips, libcurl and libmagic (Debian/Ubuntu, through apt-get).
set -euo pipefail

missing() {
  ! command -v pkg-config >/dev/null 2>&1 && return 0
  ! pkg-config --exists vips libcurl && return 0
  [ ! -f /usr/include/magic.h ] && ! pkg-config --exists libmagic 2>/dev/null && return 0
  return 1
}

if missing; then
  echo "setup: installing libvips-dev libmagic-dev libcurl4-openssl-dev" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: run as root or install sudo" >&2; exit 1; }
    SUDO=sudo
  fi
  command -v apt-get >/dev/null 2>&1 || { echo "setup: apt-get not found; install libvips, libcurl and libmagic development packages" >&2; exit 1; }
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    pkg-config libvips-dev libmagic-dev libcurl4-openssl-dev >/dev/null
fi

command -v swift >/dev/null 2>&1 || { echo "setup: swift not found on PATH (Swift 6 toolchain required)" >&2; exit 1; }
