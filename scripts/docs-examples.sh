#!/usr/bin/env bash
# The shell examples of README.md and docs/*.md that talk to PushMedia, run against a real
# `pushmedia serve` (Tests/docs/run_examples.py says how blocks are marked and what each gets).
# Exits 1 when an example fails or a block that talks to PushMedia is not marked.
#   scripts/docs-examples.sh          # BIN=.build/debug/pushmedia
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.build/debug/pushmedia}
[ -x "$BIN" ] || { echo "docs-examples: $BIN is missing (swift build first)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "docs-examples: openssl is missing" >&2; exit 1; }
exec python3 Tests/docs/run_examples.py --bin "$BIN"
