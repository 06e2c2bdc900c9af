#!/usr/bin/env bash
# `make test` after the format check and set-up: every suite once under a sanitizer, then the
# scripts against the binary that ships. Each step prints its time (`timed: NAME SECONDS`).
#   scripts/test.sh          the whole run (what `make test` and CI run)
#   scripts/test.sh asan     the whole suite under AddressSanitizer (`make asan`)
#   scripts/test.sh tsan     the whole suite under ThreadSanitizer (`make tsan`)
#
# The suites that exercise concurrency (TSAN_SUITES) run under ThreadSanitizer, every other one
# under AddressSanitizer: each suite once, under the sanitizer that finds what it could break.
# Tests run one at a time: several check answers against deadlines, which needs cores that
# other tests are not saturating.
#
# The three builds (AddressSanitizer, ThreadSanitizer, the release binary with the Swift runtime
# linked in) share one release build of the dependencies (scripts/release-tree.sh), and differ
# in the package's own modules. They are most of the run's CPU, and the tests and scripts leave
# much of it idle. So the first build (the dependencies and AddressSanitizer's modules) has both
# cores, and the others run in the background at the lowest priority (nice 19): the release
# binary's modules beside the AddressSanitizer suite, ThreadSanitizer's beside the scripts that
# check answers rather than latencies; the scripts' tools (venvs, the image's base) are
# installed beside the first build. Each is waited for before what needs it, and the scripts
# that measure latency (relay attacks, the fleet, fair shares) run with nothing beside them. A
# step that fails fails the run; the jobs in the background are stopped with it.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
# The binary that ships, which the scripts run.
export BIN=.build-static/stage/pushmedia

# Runs a step and prints how long it took: `timed NAME COMMAND [ARGUMENT ...]`.
timed() {
  local name=$1 start status=0
  start=$(date +%s)
  shift
  "$@" || status=$?
  echo "timed: $name $(($(date +%s) - start)) s (exit $status)" >&2
  return "$status"
}

# The suites that exercise concurrency: executors, gates and deadlines, the pipeline's shared
# jobs and best attempts, stores under concurrent writers, the log sink, the hook's routes and
# memos, bursts and `serve` stopping, the relays' HTTP/2 and exchange, the credentials'
# lifecycle, the fleet, the extension's exactly-once delivery, the span path's ring. A suite of
# `Tests/` is named here by its type; a new suite that starts threads, tasks or processes that
# race belongs here.
TSAN_SUITES='\.(BlockingExecutorTests|BoundedConcurrencyTests|DeadlineSemaphoreTests|ProcessResourcesTests'
TSAN_SUITES+='|PipelineTests|BestAttemptTests|ResolveTests|StoreTests|LogSinkTests|RouterTests'
TSAN_SUITES+='|MediaURLRouteTests|MediaBurstTests|ServeEndToEndTests|RelayHTTP2Tests|RelayExchangeTests'
TSAN_SUITES+='|CredentialsLifecycleTests|FleetTests|FleetCoordinationTests|DeliverOnceTests|SpanPathTests)/'

# The sanitizer builds: the package's own modules instrumented and unoptimised, over the release
# build of the dependencies that the binary that ships uses too (scripts/release-tree.sh: the
# three trees take turns at one path). Each is built in place, then parked, and its suites run
# from the parked tree while the next build has the path.
. scripts/release-tree.sh
# Leak checking is off: the Swift runtime's, Foundation's and SwiftNIO's process-wide singletons
# (thread pools, Process and URLSession bookkeeping) are still allocated at exit and would be
# reported on every run. Memory errors (overflows, use after free) are what ASan checks here.
asan_env=(ASAN_OPTIONS=detect_leaks=0 PUSHMEDIA_TEST_SANITIZER=address PUSHMEDIA_SANITIZE=address)
tsan_env=(TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
  PUSHMEDIA_TEST_SANITIZER=thread PUSHMEDIA_SANITIZE=thread)
# Builds VARIANT (asan or tsan)'s tests and the `pushmedia` they start (the command line,
# `serve` and fleet suites run it beside the test bundle, instrumented too), and parks it:
# `sanitizer_build VARIANT`. The package's other programs (`fuzz`, `relay-standin`,
# `healthz-floor`) no suite runs: they are not built here. Each step's failure is the
# function's (`timed` calls it where `set -e` does not apply).
sanitizer_build() {
  local settings="${1}_env[@]" product
  (
    lock_trees || exit
    use_tree "$1" || exit
    for product in PushMediaPackageTests pushmedia; do
      env "${!settings}" $SWIFT build "${RELEASE_FLAGS[@]}" --product "$product" || exit
    done
    park_tree >/dev/null
  )
}
# Runs VARIANT's tests from its parked tree: `sanitizer_test VARIANT [ARGUMENT ...]`, the
# arguments `swift test`'s.
sanitizer_test() {
  local settings="${1}_env[@]" tree=$RELEASE_BUILDS/$1
  shift
  env "${!settings}" $SWIFT test -c release --scratch-path "$tree" --skip-build "$@"
}

case "${1:-all}" in
  asan) timed asan-build sanitizer_build asan; timed asan-suite sanitizer_test asan --no-parallel; exit ;;
  tsan) timed tsan-build sanitizer_build tsan; timed tsan-suite sanitizer_test tsan --no-parallel; exit ;;
  all) ;;
  *) echo "usage: scripts/test.sh [asan|tsan]" >&2; exit 64 ;;
esac

start=$(date +%s)
# Jobs in the background, each in a process group of its own (stopped whole if the run fails),
# their output in a log shown if they fail: `in_background NAME NICE LOG COMMAND ...`, then
# `await_background NAME` before what needs it.
declare -A BACKGROUND_PID BACKGROUND_LOG
stop_background() {
  local name
  for name in "${!BACKGROUND_PID[@]}"; do kill -- "-${BACKGROUND_PID[$name]}" 2>/dev/null || true; done
}
trap stop_background EXIT
# Each job writes its exit status beside its log (LOG.status): a long run forks enough processes
# for a finished job's process id to be used again, and the shell then forgets its status.
in_background() {
  local name=$1 niceness=$2 log=$3
  shift 3
  mkdir -p "$(dirname "$log")"
  rm -f "$log.status"
  set -m
  (
    local job=$BASHPID status=0
    # The watcher first, at the caller's priority, so that it keeps up with the job's.
    [ "$niceness" = 0 ] || keep_niceness "$job" "$niceness" &
    renice -n "$niceness" -p "$job" >/dev/null
    timed "$name" "$@" || status=$?
    echo "$status" >"$log.status"
    exit "$status"
  ) >"$log" 2>&1 &
  BACKGROUND_PID[$name]=$!
  BACKGROUND_LOG[$name]=$log
  set +m
}
# SwiftPM starts each compiler at priority 0, whatever its own: every second, the processes
# below ROOT that have appeared since (this watcher's own excepted) are given NICENESS too,
# until ROOT ends.
keep_niceness() {
  local root=$1 niceness=$2 self=$BASHPID pids
  while kill -0 "$root" 2>/dev/null; do
    pids=$(ps -eo pid=,ppid=,ni= | awk -v root="$root" -v self="$self" -v want="$niceness" '
      { parent[$1] = $2; nice[$1] = $3 }
      END {
        for (pid in parent) {
          for (p = pid; p in parent && p != 1 && p != self; p = parent[p]) {
            if (p == root) { if (nice[pid] != want) print pid; break }
          }
        }
      }')
    [ -z "$pids" ] || renice -n "$niceness" -p $pids >/dev/null 2>&1 || true
    sleep 1
  done
}
await_background() {
  local name=$1 waited status
  waited=$(date +%s)
  # Ends when the job does (or at once, for one whose id the shell no longer knows).
  wait "${BACKGROUND_PID[$name]}" 2>/dev/null || true
  while [ ! -e "${BACKGROUND_LOG[$name]}.status" ] && [ -d "/proc/${BACKGROUND_PID[$name]}" ]; do sleep 1; done
  status=$(cat "${BACKGROUND_LOG[$name]}.status" 2>/dev/null || echo "none (stopped)")
  unset "BACKGROUND_PID[$name]"
  if [ "$status" != 0 ]; then
    cat "${BACKGROUND_LOG[$name]}" >&2
    echo "test: $name, in the background, failed (exit status $status)" >&2
    exit 1
  fi
  grep '^timed:' "${BACKGROUND_LOG[$name]}" >&2 || true
  echo "timed: waited $(($(date +%s) - waited)) s for $name" >&2
}

# Waits until the job NAME in the background has made FILE (a step of its own done), or fails
# with it: `await_step NAME FILE`.
await_step() {
  local name=$1 file=$2 waited
  waited=$(date +%s)
  until [ -e "$file" ]; do
    if [ -e "${BACKGROUND_LOG[$name]}.status" ]; then
      await_background "$name"
      [ -e "$file" ] || { echo "test: $name ended without making $file" >&2; exit 1; }
    fi
    sleep 1
  done
  echo "timed: waited $(($(date +%s) - waited)) s for $file" >&2
}

# The builds after the first, one after the other (they take turns at one path): the binary
# that ships and the fair-share check's stand-in, which the scripts need (then RELEASE_DONE is
# made), and ThreadSanitizer's modules, which only its suites need. The first that fails ends
# the job with its status.
RELEASE_DONE=$RELEASE_BUILDS/release-done
later_builds() {
  timed release-static scripts/release-static.sh || return
  scripts/release-static.sh --product relay-standin >/dev/null || return
  : >"$RELEASE_DONE"
  timed tsan-build sanitizer_build tsan
}

# What the scripts install for themselves (venvs from PyPI, the image's Debian base), beside the
# first build, at the lowest priority: much of it is waiting on the network and the disk.
in_background test-tools 19 .build/test-tools.log scripts/test-tools.sh
# The dependencies (release, uninstrumented) and the package for AddressSanitizer, with both
# cores. Then its suites, and beside them and the scripts, at the lowest priority, the later
# builds.
timed asan-build sanitizer_build asan
rm -f "$RELEASE_DONE"
in_background later-builds 19 "$RELEASE_BUILDS/later-builds.log" later_builds
timed asan-suite sanitizer_test asan --no-parallel --skip "$TSAN_SUITES"
await_step later-builds "$RELEASE_DONE"
await_background test-tools
timed api-conformance scripts/api-conformance.sh
timed apns-relay scripts/apns-relay.sh
timed fcm-relay scripts/fcm-relay.sh
timed media-url scripts/media-url.sh
timed tracing scripts/tracing.sh
timed docs-examples scripts/docs-examples.sh
timed image-test scripts/image-test.sh
timed deb-test scripts/deb-test.sh
await_background later-builds

timed relay-attacks scripts/relay-attacks.sh
timed fleet scripts/fleet.sh
timed relay-fairness scripts/relay-fairness.sh
timed tsan-suite sanitizer_test tsan --no-parallel --filter "$TSAN_SUITES"
echo "timed: make-test $(($(date +%s) - start)) s" >&2
