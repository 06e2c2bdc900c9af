#!/usr/bin/env bash
# GET /healthz through PushMedia's middleware beside its floor, a bare Hummingbird application
# answering the same route with the same bytes (Sources/HealthzFloor), in one run:
#   pushmedia       `pushmedia serve` as shipped: default settings, its info log written to a file
#   floor_log       the bare application with one info line per request (Hummingbird's
#                   LogRequestsMiddleware) written to a file: the same work, the headline floor
#   floor           the bare application without a log line
# Each pass runs twice, in turn; the server's CPU per request from its /proc times.
#
#   bench/healthz.sh          SECONDS_EACH=10 CONNECTIONS=64
#
# wrk runs on the same 2 cores. Writes bench/out/healthz/results.json and prints a table.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
OUT="$BENCH/out/healthz"
SECONDS_EACH=${SECONDS_EACH:-10}
CONNECTIONS=${CONNECTIONS:-64}
SCRATCH="$ROOT/.build-bench"
source "$BENCH/lib.sh"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

log "tools and build"
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path "$SCRATCH" --product pushmedia 2>&1 | tail -n 1) >&2
  (cd "$ROOT" && swift build -c release -j 2 --scratch-path "$SCRATCH" --product healthz-floor 2>&1 | tail -n 1) >&2
fi
BIN=${BIN:-"$SCRATCH/release/pushmedia"}
FLOOR=${FLOOR:-"$SCRATCH/release/healthz-floor"}
[[ -x $BIN && -x $FLOOR ]] || die "no $BIN or $FLOOR"
rm -rf "$OUT"; mkdir -p "$OUT"

PM_PORT=$(free_port); LOG_PORT=$(free_port); BARE_PORT=$(free_port)
env -u PUSHMEDIA_LOG_LEVEL "$BIN" serve --port "$PM_PORT" --store "$OUT/store" >> "$OUT/serve.out" 2>> "$OUT/serve.log" &
PM_PID=$!; PIDS+=("$PM_PID")
wait_http "http://127.0.0.1:$PM_PORT/healthz"
SERVER=$(curl -fsS -D - -o /dev/null "http://127.0.0.1:$PM_PORT/healthz" | tr -d '\r' | sed -n 's/^[Ss]erver: //p')
"$FLOOR" "$LOG_PORT" --log "$SERVER" > "$OUT/floor-log.out" 2> "$OUT/floor-log.log" &
LOG_PID=$!; PIDS+=("$LOG_PID")
"$FLOOR" "$BARE_PORT" "$SERVER" > "$OUT/floor.out" 2> "$OUT/floor.log" &
BARE_PID=$!; PIDS+=("$BARE_PID")
for port in "$PM_PORT" "$LOG_PORT" "$BARE_PORT"; do wait_http "http://127.0.0.1:$port/healthz"; done
for port in "$LOG_PORT" "$BARE_PORT"; do
  diff <(curl -fsS "http://127.0.0.1:$PM_PORT/healthz") <(curl -fsS "http://127.0.0.1:$port/healthz") >/dev/null ||
    die "the floor's answer differs from PushMedia's"
done

pass() { # NAME PID URL
  local name=$1 pid=$2 url=$3 c0 c1
  c0=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --latency "$url" > "$OUT/$name.wrk.txt" 2>&1 || true
  c1=$(python3 "$BENCH/measure.py" tree-cpu "$pid")
  python3 - "$OUT" "$name" "$c0" "$c1" <<'PY'
import json, re, sys
out, name, c0, c1 = sys.argv[1:5]
text = open(f"{out}/{name}.wrk.txt").read()
requests = int(re.search(r"(\d+) requests in", text).group(1))
errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
errors += int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
r = {"name": name, "req_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)), "requests": requests,
     "errors": errors, "server_cpu_us_per_request": round((float(c1) - float(c0)) * 1e6 / max(1, requests), 1)}
json.dump(r, open(f"{out}/{name}.json", "w"))
print(f"  {name}: {r['req_per_s']:.0f} req/s, {r['server_cpu_us_per_request']} CPU-µs/request, errors {errors}",
      file=sys.stderr)
PY
}

log "wrk: $CONNECTIONS connections, ${SECONDS_EACH}s each, two rounds"
for round in 1 2; do
  pass "pushmedia_$round" "$PM_PID" "http://127.0.0.1:$PM_PORT/healthz"
  pass "floor_log_$round" "$LOG_PID" "http://127.0.0.1:$LOG_PORT/healthz"
  pass "floor_$round" "$BARE_PID" "http://127.0.0.1:$BARE_PORT/healthz"
done
[[ $(wc -l < "$OUT/serve.log") -gt 1000 && $(wc -l < "$OUT/floor-log.log") -gt 1000 ]] ||
  die "a log line per request was not written"

python3 - "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, sys
out, commit = sys.argv[1], sys.argv[2]
names = ["pushmedia", "floor_log", "floor"]
r = {f"{n}_{k}": json.load(open(f"{out}/{n}_{k}.json")) for n in names for k in (1, 2)}
cpu = {n: sum(r[f"{n}_{k}"]["server_cpu_us_per_request"] for k in (1, 2)) / 2 for n in names}
ratios = {"pushmedia / floor_log": round(cpu["pushmedia"] / cpu["floor_log"], 3),
          "pushmedia / floor": round(cpu["pushmedia"] / cpu["floor"], 3)}
json.dump({"commit": commit, "passes": r, "cpu_us_per_request": cpu, "ratios": ratios},
          open(f"{out}/results.json", "w"), indent=1)
print("\n| pass | req/s | server CPU-µs/request | errors |\n|---|---:|---:|---:|")
for n, p in r.items():
    print(f"| {n} | {p['req_per_s']:,.0f} | {p['server_cpu_us_per_request']} | {p['errors']} |")
print(f"\n- PushMedia's /healthz / the bare application with its log line: {ratios['pushmedia / floor_log']:.2f} "
      f"(mean CPU per request of two rounds: {cpu['pushmedia']:.1f} against {cpu['floor_log']:.1f} µs)")
print(f"- against the bare application without a log line: {ratios['pushmedia / floor']:.2f} ({cpu['floor']:.1f} µs)")
print(f"- commit {commit}")
PY
