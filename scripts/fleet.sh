#!/usr/bin/env bash
# A fleet end to end (Tests/fleet/fleet_test.py): three `pushmedia serve` nodes on one bucket of the
# real object store (scripts/object-store.sh), coordinated through a real PostgreSQL from Debian's
# packages (scripts/postgres.sh, started here), behind nginx from Debian (installed when missing).
# One fetch and one job per media in the fleet under 300 concurrent requests, a killed lease
# holder replaced, PostgreSQL stopped and started mid-campaign, purges heard by every node,
# hostile --fleet-db values. Exits 1 when a check fails.
#   scripts/fleet.sh                       # BIN=.build/debug/pushmedia
#   scripts/fleet.sh --only purge -v
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.build/debug/pushmedia}
TOOLS=.build/tools/fleet

. scripts/venv.sh
ensure_venv "$TOOLS" Tests/fleet/requirements.txt

if ! { [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null; } && command -v apt-get >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "fleet: installing nginx-light" >&2
  install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null; }
  install || { $SUDO apt-get update -qq >/dev/null && install; }
fi
scripts/object-store.sh start
scripts/postgres.sh start

exec "$TOOLS/bin/python" Tests/fleet/fleet_test.py --bin "$BIN" "$@"
