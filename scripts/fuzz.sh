#!/usr/bin/env bash
# Runs a libFuzzer target for a while: scripts/fuzz.sh payload|media|bmp|video|h2|all [SECONDS] [--merge]
#
#   payload  JSON parse + media locate (every vendor's shape) + payload rewrite over arbitrary bytes (fuzz payload)
#   media    libmagic sniff + libvips header probe + BMP decode over arbitrary bytes (fuzz media)
#   bmp      the BMP decoder and the conversion of what it decodes (fuzz bmp)
#   video    ffprobe's answer parsed + the real ffprobe/ffmpeg children on small files (fuzz video)
#   h2       the relays' HTTP/2 sessions, server and client, over a peer's bytes (fuzz h2)
#   all      all five, one after the other, SECONDS each (default 60)
#
# The committed seeds (fuzz/corpus/TARGET) are copied into a working corpus,
# fuzz/artifacts/corpus-TARGET/, which keeps what libFuzzer finds between runs; --merge adds the
# inputs that reach new coverage back into fuzz/corpus/TARGET. Crash reproducers are written as
# fuzz/artifacts/TARGET-crash-*; the full log is fuzz/artifacts/TARGET.log. Exits 1 on a crash.
# Extra libFuzzer flags: FUZZ_FLAGS="-jobs=2 -workers=2" scripts/fuzz.sh media 600
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/fuzz.sh payload|media|bmp|video|h2|all [SECONDS] [--merge]" >&2; exit 64; }
[ $# -ge 1 ] || usage
TARGET=$1; shift
SECONDS_EACH=60
MERGE=0
for arg in "$@"; do
  case $arg in
    --merge) MERGE=1 ;;
    ''|*[!0-9]*) usage ;;
    *) SECONDS_EACH=$arg ;;
  esac
done
case $TARGET in payload|media|bmp|video|h2) TARGETS=$TARGET ;; all) TARGETS="payload media bmp video h2" ;; *) usage ;; esac

# The Swift toolchain (it ships clang's libFuzzer and ASan runtimes) and the system libraries.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then PATH=/opt/swift/usr/bin:$PATH; fi
scripts/setup.sh
SWIFT_BIN=$(dirname "$(readlink -f "$(command -v swift)")")
if ! ls "$SWIFT_BIN"/../lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 &&
   ! ls "$SWIFT_BIN"/../lib/swift/clang/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
  echo "fuzz: this Swift toolchain has no libFuzzer runtime (libclang_rt.fuzzer); use a swift.org toolchain" >&2
  exit 1
fi
# swiftc links with gold on Linux (binutils).
if ! command -v ld.gold >/dev/null 2>&1; then
  echo "fuzz: installing binutils (ld.gold)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends binutils >/dev/null
fi

SCRATCH=.build-fuzz
# Optimized by default (about 4x the executions of -c debug); FUZZ_CONFIG=debug for clearer traces.
CONFIG=${FUZZ_CONFIG:-release}
mkdir -p fuzz/artifacts
status=0
echo "fuzz: building fuzz ($CONFIG, libFuzzer + ASan, $SCRATCH)"
# -parse-as-library: main.swift holds only declarations under FUZZING (libFuzzer drives it).
# -Xcc: the C shims get the same instrumentation as the Swift code (coverage and ASan).
if ! swift build --scratch-path "$SCRATCH" -c "$CONFIG" -j 2 --product fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DFUZZING \
    -Xcc -fsanitize=fuzzer-no-link,address \
    >"fuzz/artifacts/build.log" 2>&1; then
  grep -E "error|warning: unable" "fuzz/artifacts/build.log" | grep -v "Cannot export local symbol" | head -20 >&2
  echo "fuzz: build failed, see fuzz/artifacts/build.log" >&2
  exit 1
fi
binary=$SCRATCH/$CONFIG/fuzz
for target in $TARGETS; do
  product="fuzz $target"
  log=fuzz/artifacts/$target.log

  work=fuzz/artifacts/corpus-$target
  mkdir -p "$work"
  cp -n fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
  case $target in
    payload) max_len=5000 ;;   # a little over APNs' 4096 bytes
    media) max_len=8192 ;;     # file heads: the sniffer and the header readers look at the start
    bmp) max_len=8192 ;;       # small bitmaps: every header, palette and RLE path fits
    video) max_len=16384 ;;    # probe answers, and small files for the real children
    h2) max_len=4096 ;;        # a few frames: settings, headers with HPACK, data, resets
  esac
  before=$(ls fuzz/artifacts | grep -c "^$target-\(crash\|leak\|timeout\|oom\|slow-unit\)-" || true)
  echo "fuzz: running $product for ${SECONDS_EACH}s on $work ($(ls "$work" | wc -l) inputs); log $log"
  set +e
  # Leaks are not checked: libvips and GLib keep process-wide caches that LeakSanitizer reports.
  # Swift's own backtracer would race libFuzzer's crash handler (and trip ASan): off.
  SWIFT_BACKTRACE=enable=no ASAN_SYMBOLIZER_PATH=$SWIFT_BIN/llvm-symbolizer \
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1} \
  "$binary" "$target" "$work" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 \
    -dict="fuzz/dict/$target.dict" -artifact_prefix="fuzz/artifacts/$target-" -print_final_stats=1 \
    ${FUZZ_FLAGS:-} >"$log" 2>&1
  rc=$?
  set -e
  { grep -E "^#[0-9]+[[:space:]]+(INITED|DONE|pulse|NEW|REDUCE)" "$log" | tail -1 | sed -E "s/^#([0-9]+)[[:space:]]+[A-Z]+[[:space:]]+/fuzz: after \1 runs: /"
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log" | tr -s ' ' | sed 's/^stat::/fuzz: /'
  } || true
  after=$(ls fuzz/artifacts | grep -c "^$target-\(crash\|leak\|timeout\|oom\|slow-unit\)-" || true)
  if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
    status=1
    echo "fuzz: $product FAILED (exit $rc):" >&2
    # Optimized builds trap without the precondition's message: the file:line in the trace says which.
    grep -E "^==[0-9]+== ?ERROR|Fatal error|SUMMARY|^ +#[0-9]+ 0x" "$log" | grep -v "compiler-rt/lib\|libc.so\|libc_start\|_start (" |
      head -20 | sed -E 's/ 0x[0-9a-f]+ in / /' | swift demangle --simplified >&2
    grep -E "Test unit written to" "$log" | sed 's/.*Test unit written to /fuzz: reproducer: /' >&2
    echo "fuzz: replay: $binary $target REPRODUCER (or a plain build's .build/debug/fuzz $target -v REPRODUCER for the message);" \
      "keep it as a regression test in fuzz/crashes/$target/" >&2
  else
    echo "fuzz: $product: no crash"
  fi
  if [ "$MERGE" = 1 ]; then
    count=$(ls fuzz/corpus/"$target" | wc -l)
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$binary" "$target" -merge=1 -max_len="$max_len" \
      fuzz/corpus/"$target" "$work" >"fuzz/artifacts/$target-merge.log" 2>&1 ||
      { echo "fuzz: merge failed, see fuzz/artifacts/$target-merge.log" >&2; status=1; }
    echo "fuzz: merged $(( $(ls fuzz/corpus/"$target" | wc -l) - count )) new input(s) into fuzz/corpus/$target"
  fi
done
exit $status
