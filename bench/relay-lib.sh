# What the relay benchmarks (apns-relay.sh, fcm-relay.sh) share (sourced after lib.sh): tools,
# the release build, certificates, HAProxy as sink and as plain hop, the media origin, starting
# a relay, CPU accounting and a perf profile. Expects BENCH, ROOT, OUT and BIN to be set.

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# h2load, HAProxy and perf from Debian when missing; the release build unless SKIP_BUILD=1.
relay_tools() {
  local need_apt=()
  command -v h2load >/dev/null || need_apt+=(nghttp2-client)
  command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]] || need_apt+=(haproxy)
  command -v perf >/dev/null || need_apt+=(linux-perf)
  if ((${#need_apt[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  fi
  HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
  # h2load sends one body file: this preload makes each body different (bench/h2load-distinct.c).
  DISTINCT_SHIM="$ROOT/.build-bench/h2load-distinct.so"
  mkdir -p "$ROOT/.build-bench"
  gcc -shared -fPIC -O2 -o "$DISTINCT_SHIM" "$BENCH/h2load-distinct.c" -ldl
  if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    (cd "$ROOT" && swift build -c release -j 2 --scratch-path .build-bench --product pushmedia >/dev/null)
  fi
}

# relay_setup "SINK ANSWER": tools and build, a fresh $OUT as the current folder, certificates,
# HAProxy (sink and hop) and the origin.
relay_setup() {
  log "tools and build"
  relay_tools
  rm -rf "$OUT" && mkdir -p "$OUT"
  cd "$OUT"
  log "certificates, HAProxy, origin"
  relay_certs
  relay_haproxy "$1"
  relay_origin
}

# A test CA (ca.pem), a certificate for localhost/127.0.0.1 (server.pem, server.key; both in
# server-haproxy.pem), and an ES256 key (AuthKey.p8), in the current folder.
relay_certs() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=bench CA" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
    -subj "/CN=localhost" 2>/dev/null
  printf "subjectAltName=DNS:localhost,IP:127.0.0.1\n" >ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
    -extfile ext.cnf 2>/dev/null
  cat server.pem server.key >server-haproxy.pem
  openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out AuthKey.p8
}

# relay_haproxy "SINK ANSWER": two HAProxy processes, TLS and HTTP/2 on both sides: the sink on
# $SINK answering every request with the given `http-request return` arguments, and the plain hop
# on $HOP passing requests to the sink with its per-request log on (`option httplog`, written to
# haproxy-hop.log as the relay's goes to its file: the same work on both sides). Each in its own
# process: the hop's CPU is the hop's alone, as the relay's is the relay's. Sets SINK, HOP,
# SINK_PID and HAPROXY_PID (the hop's). SINK_IDLE: how long the sink keeps a connection with
# nothing on it open (60s; HAProxy's `timeout client`).
relay_haproxy() {
  SINK=$(free_port)
  HOP=$(free_port)
  local common="global
  maxconn 4000
  log stderr format raw local0 emerg
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s"
  cat >"$OUT/haproxy-sink.cfg" <<EOF
$common
frontend sink
  bind 127.0.0.1:$SINK ssl crt $OUT/server-haproxy.pem alpn h2
  timeout client ${SINK_IDLE:-60s}
  http-request return $1
EOF
  cat >"$OUT/haproxy.cfg" <<EOF
$common
frontend hop
  bind 127.0.0.1:$HOP ssl crt $OUT/server-haproxy.pem alpn h2
  log stdout format raw local0 info
  option httplog
  default_backend sink
backend sink
  http-reuse always
  server sink 127.0.0.1:$SINK ssl verify required ca-file $OUT/ca.pem alpn h2
EOF
  "$HAPROXY" -f "$OUT/haproxy-sink.cfg" -db >/dev/null 2>"$OUT/haproxy-sink.log" &
  SINK_PID=$!
  PIDS+=($SINK_PID)
  "$HAPROXY" -f "$OUT/haproxy.cfg" -db >"$OUT/haproxy-hop.log" 2>"$OUT/haproxy.log" &
  HAPROXY_PID=$!
  PIDS+=($HAPROXY_PID)
}

# The campaign's image (samples/media/banner.webp, served without an extension as /banner) on
# 127.0.0.1:$ORIGIN.
relay_origin() {
  ORIGIN=$(free_port)
  mkdir -p media && cp "$ROOT/samples/media/banner.webp" media/banner
  # Modified a month ago: by RFC 9111's heuristic (a tenth of its age) the source stays fresh for
  # --max-ttl. Modified now, it was revalidated every --min-ttl (a minute), inside one server's
  # pass and not another's.
  touch -d '30 days ago' media/banner
  (cd media && exec python3 -m http.server "$ORIGIN" --bind 127.0.0.1 >/dev/null 2>&1) &
  PIDS+=($!)
}

# start_relay apns|fcm NAME [serve arguments...]: a relay over TLS to the sink, trusting the
# origin, as shipped (log level info: a line per push) with its log written to relay-NAME.log, as
# an operator would; sets RELAY (its port) and RELAY_PID once it listens. RELAY_WRAP (an array:
# a program and its arguments) runs it under that program, which must keep its process id
# (valgrind does); RELAY_START_TRIES tenths of a second are waited for it to listen (100).
start_relay() {
  local kind=$1 name=$2 banner
  shift 2
  [[ $kind == apns ]] && banner="APNs relay" || banner="FCM relay"
  ${RELAY_WRAP[@]+"${RELAY_WRAP[@]}"} "$BIN" serve --port 0 --store "$OUT/store-$name" "--$kind-port" 0 \
    "--$kind-tls-cert" server.pem "--$kind-tls-key" server.key "--$kind-upstream" "https://localhost:$SINK" \
    "--$kind-upstream-ca" ca.pem --trust-peer "127.0.0.1:$ORIGIN" "$@" >"relay-$name.out" 2>"relay-$name.log" &
  RELAY_PID=$!
  PIDS+=($RELAY_PID)
  RELAY=""
  for _ in $(seq "${RELAY_START_TRIES:-100}"); do
    RELAY=$(sed -n "s|.*$banner on https://127.0.0.1:\([0-9]*\).*|\1|p" "relay-$name.out" | head -1)
    [[ -n $RELAY ]] && break
    sleep 0.1
  done
  [[ -n $RELAY ]] || { cat "relay-$name.log" >&2; exit 1; }
}

# relay_fcm_message: the FCM campaign message (an image from the origin, Android and iOS parts) in
# message.json, and SEND, the path it is sent to.
relay_fcm_message() {
  python3 - "$ORIGIN" <<'PY'
import json, sys
origin = sys.argv[1]
message = {"message": {"token": "bench-device-token-0001",
                       "notification": {"title": "Weekend sale", "body": "Half price on everything",
                                        "image": f"http://127.0.0.1:{origin}/banner"},
                       "android": {"priority": "high", "notification": {"channel_id": "deals"}},
                       "apns": {"payload": {"aps": {"sound": "default"}}},
                       "data": {"campaign": "c-1"}}}
open("message.json", "w").write(json.dumps(message, separators=(",", ":")))
PY
  SEND=/v1/projects/bench/messages:send
}

# An APNs provider token (ES256, key BENCHKEY01 of team BENCHTEAM1) signed with AuthKey.p8.
relay_jwt() {
  python3 - <<'EOF'
import base64, json, subprocess, time
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
head = b64(json.dumps({"alg": "ES256", "kid": "BENCHKEY01"}).encode())
claims = b64(json.dumps({"iss": "BENCHTEAM1", "iat": int(time.time())}).encode())
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "AuthKey.p8"], input=f"{head}.{claims}".encode(),
                     capture_output=True, check=True).stdout
# DER ECDSA signature -> raw r||s
def read_int(b, i):
    assert b[i] == 2; n = b[i + 1]; return int.from_bytes(b[i + 2:i + 2 + n], "big"), i + 2 + n
r, i = read_int(der, 2); s, _ = read_int(der, i)
print(f"{head}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}")
EOF
}

TICK=$(getconf CLK_TCK)
# User + system CPU ticks of a process.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# cpu_us_per BEFORE AFTER COUNT: CPU µs per item between two cpu_ticks readings.
cpu_us_per() { python3 -c "print(round(($2 - $1) / $TICK * 1e6 / max(1, $3), 2))"; }

# h2load_run NAME PID UNIT H2LOAD-ARGS...: one h2load pass (its output in h2load-NAME.txt),
# recorded in runs.jsonl as {name, per_s, ok, cpu_us, sink_cpu_us} with the CPU µs per request
# of PID ("" for none) and of the sink's process, and printed a line with UNIT (pushes, messages).
h2load_run() {
  local name=$1 pid=$2 unit=$3
  shift 3
  local before=0 after=0 sink_before sink_after rps ok cpu_us="" sink_us
  [[ -n $pid ]] && before=$(cpu_ticks "$pid")
  sink_before=$(cpu_ticks "$SINK_PID")
  if [[ $name == distinct* || $name == perf-distinct* ]]; then
    LD_PRELOAD="$DISTINCT_SHIM" h2load "$@" >"h2load-$name.txt" 2>&1
  else
    h2load "$@" >"h2load-$name.txt" 2>&1
  fi
  sink_after=$(cpu_ticks "$SINK_PID")
  [[ -n $pid ]] && after=$(cpu_ticks "$pid")
  rps=$(sed -n 's/^finished in .*s, \([0-9.]*\) req\/s.*/\1/p' "h2load-$name.txt")
  ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "h2load-$name.txt")
  [[ -n $pid ]] && cpu_us=$(cpu_us_per "$before" "$after" "$ok")
  sink_us=$(cpu_us_per "$sink_before" "$sink_after" "$ok")
  echo "{\"name\":\"$name\",\"per_s\":$rps,\"ok\":$ok,\"cpu_us\":${cpu_us:-null},\"sink_cpu_us\":$sink_us}" >>runs.jsonl
  printf '  %-22s %10s %s/s  %6s 2xx  %8s µs CPU/%s  (sink %s)\n' "$name" "$rps" "$unit" "$ok" "${cpu_us:--}" \
    "${unit%s}" "$sink_us"
}

# relay_perf NAME PID COMMAND...: a perf profile (call graphs) of PID while COMMAND runs, summed
# by shared object (perf-NAME-dso.txt) and by symbol, self and inclusive (perf-NAME-symbols.txt,
# perf-NAME-inclusive.txt). PERF=0, or no perf, skips.
relay_perf() {
  local name=$1 pid=$2
  shift 2
  [[ ${PERF:-1} != 0 ]] && perf stat -e task-clock true >/dev/null 2>&1 || return 0
  log "perf: the $name path"
  perf record -g -o "perf-$name.data" -p "$pid" -- sleep 8 >/dev/null 2>&1 &
  local perf_pid=$!
  sleep 0.5
  "$@" >/dev/null
  wait "$perf_pid" || true
  perf report -i "perf-$name.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' \
    | grep -v '^$' | head -25 >"perf-$name-dso.txt" || true
  perf report -i "perf-$name.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' \
    | grep -v '^$' | head -40 >"perf-$name-symbols.txt" || true
  perf report -i "perf-$name.data" --children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' \
    | grep -v '^$' | head -80 >"perf-$name-inclusive.txt" || true
}
