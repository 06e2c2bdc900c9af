#!/usr/bin/env bash
# The fleet's cost beside no fleet, in one run (bench/fleet_bench.py): the lease on a cold
# request (p50 added over per-node single flight, the two nodes asked in turn), and the cached
# path's PostgreSQL traffic (none: the transactions committed on the fleet's database while a
# node answers cached requests, against the same node idle), and a batch of distinct sources as a
# local `pushmedia batch` beside the same payloads as a fleet batch worked by two and by one
# `pushmedia work`. Everything runs as shipped (default settings, info logs written to a file) on
# the PostgreSQL of scripts/postgres.sh.
#
#   bench/fleet.sh          ITEMS=120 REPEATS=2000 BATCH=200
#
# Writes bench/out/fleet/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/fleet"
ITEMS=${ITEMS:-120}
REPEATS=${REPEATS:-2000}
BATCH=${BATCH:-200}
BIN=${BIN:-"$ROOT/.build-bench/release/pushmedia"}
source "$BENCH/lib.sh"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  pkg-config --exists vips libcurl 2>/dev/null || "$ROOT/scripts/setup.sh"
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia 2>&1 | tail -n 3) >&2
fi
[[ -x $BIN ]] || die "no $BIN"
"$ROOT/scripts/postgres.sh" start
rm -rf "$OUT"; mkdir -p "$OUT"
python3 "$BENCH/fleet_bench.py" --bin "$BIN" --out "$OUT" --items "$ITEMS" --repeats "$REPEATS" --batch "$BATCH"
