#!/usr/bin/env bash
# Runs a step of `make test` and prints how long it took, so a run's log says where its time
# went (docs/development.md lists the parts of a clean run):
#   scripts/timed.sh NAME COMMAND [ARGUMENT ...]
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
status=$?
echo "timed: $name $(($(date +%s) - start)) s (exit $status)" >&2
exit $status
