#!/usr/bin/env bash
# Media URLs end to end (Tests/mediaurl/media_url_test.py): a real `pushmedia serve` with a URL key
# and an allow-listed origin on 127.0.0.1; imgproxy's URL builders from PyPI (pinned in
# Tests/mediaurl/requirements.txt, installed into .build/tools/mediaurl) make the URLs, and so do
# `pushmedia url` and the Python and Node helpers of docs/media-urls.md; curl and headless Chromium fetch them;
# nginx from Debian (installed when missing) caches them as a CDN would, 200 phones at once making
# one origin fetch; hostile paths and a stalled origin over real HTTP. Exits 1 when a check fails.
#   scripts/media-url.sh                       # BIN=.build/debug/pushmedia
#   scripts/media-url.sh --only cdn -v
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/mediaurl
REQUIREMENTS=Tests/mediaurl/requirements.txt

. scripts/venv.sh
ensure_venv "$TOOLS" "$REQUIREMENTS"

packages=()
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || packages+=(nginx-light)
command -v node >/dev/null || command -v nodejs >/dev/null || packages+=(nodejs)
command -v curl >/dev/null || packages+=(curl)
if ((${#packages[@]})) && command -v apt-get >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "media-url: installing ${packages[*]}" >&2
  install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null; }
  install || { $SUDO apt-get update -qq >/dev/null && install; }
fi

exec "$TOOLS/bin/python" Tests/mediaurl/media_url_test.py --bin "$BIN" "$@"
