#!/usr/bin/env bash
# A real S3-compatible object store for the tests and benchmarks: OpenStack Swift from Debian's
# packages (proxy, account, container and object servers, all on 127.0.0.1, one replica) with its
# s3api middleware (S3 with AWS Signature V4) and tempauth, plus the memcached tempauth needs.
#
#   scripts/object-store.sh start    install what is missing, configure once, start, wait until ready
#   scripts/object-store.sh stop     stop every server (PID files)
#   scripts/object-store.sh status   exit 0 when the endpoint answers
#   scripts/object-store.sh env      print the settings to reach it (shell assignments)
#
# Idempotent: `start` on a running store returns at once. State (configuration, rings, data,
# PID files, logs) lives in $PUSHMEDIA_OBJECT_STORE_DIR (default /var/tmp/pushmedia-object-store);
# the data directory must support user extended attributes (ext4, xfs; not every tmpfs).
#
# S3 credentials: access key "pushmedia:tester", secret "pushmedia-testing-secret", region
# us-east-1, path-style addressing at http://127.0.0.1:$PORT. Public reads of a bucket use
# Swift's own path (see `public-read BUCKET`): http://127.0.0.1:$PORT/v1/AUTH_pushmedia/BUCKET/KEY.
#
#   scripts/object-store.sh make-bucket BUCKET   create BUCKET (idempotent)
#   scripts/object-store.sh public-read BUCKET   allow anonymous GETs of BUCKET's objects
set -euo pipefail

STATE=${PUSHMEDIA_OBJECT_STORE_DIR:-/var/tmp/pushmedia-object-store}
PORT=${PUSHMEDIA_OBJECT_STORE_PORT:-9480}
OBJECT_PORT=$((PORT + 1))
CONTAINER_PORT=$((PORT + 2))
ACCOUNT_PORT=$((PORT + 3))
MEMCACHED_PORT=$((PORT + 4))
ACCOUNT=pushmedia
USER=tester
KEY=pushmedia-testing-secret
ENDPOINT="http://127.0.0.1:$PORT"
SERVERS=(account container object proxy)
# Bumped when the generated configuration changes, so that `start` writes it again.
CONFIG_VERSION=3

log() { echo "object-store: $*" >&2; }

# The proxy's health check passes and every storage server answers HTTP at all (the proxy alone
# is not enough: right after a start it answers 503 for objects until the object server listens).
healthy() {
  local port
  curl -fsS --max-time 2 "$ENDPOINT/healthcheck" >/dev/null 2>&1 || return 1
  for port in "$OBJECT_PORT" "$CONTAINER_PORT" "$ACCOUNT_PORT"; do
    curl -sS --max-time 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null || return 1
  done
}

install_missing() {
  local packages=()
  for command in swift-proxy-server:swift-proxy swift-object-server:swift-object swift-container-server:swift-container \
                 swift-account-server:swift-account swift-ring-builder:swift memcached:memcached curl:curl; do
    command -v "${command%%:*}" >/dev/null 2>&1 || packages+=("${command##*:}")
  done
  [ "${#packages[@]}" -eq 0 ] && return 0
  log "installing ${packages[*]}"
  local sudo=""
  [ "$(id -u)" != 0 ] && sudo=sudo
  # --no-install-recommends: the recommended python3-swiftclient installs /usr/bin/swift, which
  # would shadow the Swift toolchain's `swift` on a PATH that lists /usr/bin first.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  # The packages register services for an init system; this store runs its own processes.
  for unit in swift-proxy swift-object swift-container swift-account memcached; do
    $sudo service "$unit" stop >/dev/null 2>&1 || true
  done
}

# Swift reads /etc/swift/swift.conf whatever its other configuration says. The package ships
# "changeme" as the hash path suffix; a fixed value is set once (it must never change later).
hash_suffix() {
  local conf=/etc/swift/swift.conf
  if [ ! -f "$conf" ] || grep -q '^swift_hash_path_suffix *= *changeme' "$conf" || ! grep -q '^swift_hash_path_suffix' "$conf"; then
    local sudo=""
    [ "$(id -u)" != 0 ] && sudo=sudo
    $sudo mkdir -p /etc/swift
    printf '[swift-hash]\nswift_hash_path_suffix = pushmedia-object-store\nswift_hash_path_prefix =\n\n[storage-policy:0]\nname = Policy-0\ndefault = yes\n' \
      | $sudo tee "$conf" >/dev/null
  fi
}

server_conf() {  # name port app
  cat >"$STATE/etc/$1-server.conf" <<EOF
[DEFAULT]
devices = $STATE/devices
mount_check = false
bind_ip = 127.0.0.1
bind_port = $2
workers = 0
swift_dir = $STATE/etc
log_name = $1-server
log_level = WARNING

[pipeline:main]
pipeline = $1-server

[app:$1-server]
use = egg:swift#$1

[$1-replicator]
[$1-updater]
[$1-auditor]
EOF
}

configure() {
  [ -f "$STATE/etc/configured-$PORT-v$CONFIG_VERSION" ] && return 0
  rm -rf "$STATE/etc"
  mkdir -p "$STATE/etc" "$STATE/devices/d1" "$STATE/run" "$STATE/log"
  if ! setfattr -n user.pushmedia -v 1 "$STATE/devices/d1" 2>/dev/null && ! python3 -c "import os,sys; os.setxattr(sys.argv[1], 'user.pushmedia', b'1')" "$STATE/devices/d1" 2>/dev/null; then
    log "$STATE/devices does not support user extended attributes; set PUSHMEDIA_OBJECT_STORE_DIR to a folder on ext4 or xfs"
    exit 1
  fi
  server_conf account "$ACCOUNT_PORT"
  server_conf container "$CONTAINER_PORT"
  server_conf object "$OBJECT_PORT"
  cat >"$STATE/etc/proxy-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $PORT
workers = 0
swift_dir = $STATE/etc
log_name = proxy-server
log_level = WARNING

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
# One replica on one device: never stop using it after errors. By default the proxy refuses a
# server for a minute after 10 errors (503 "Please reduce your request rate"), which is what a
# restart while clients retry produces.
error_suppression_limit = 1000000

[filter:s3api]
use = egg:swift#s3api
location = us-east-1

[filter:tempauth]
use = egg:swift#tempauth
user_${ACCOUNT}_${USER} = $KEY .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$MEMCACHED_PORT
# A burst of hundreds of requests at once: enough connections to memcached (2 by default), and
# errors that suppress it for seconds, not a minute (tempauth then answers 503 for that long).
memcache_max_connections = 64
error_suppression_interval = 5

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
EOF
  (
    cd "$STATE/etc"
    for ring in account:$ACCOUNT_PORT container:$CONTAINER_PORT object:$OBJECT_PORT; do
      swift-ring-builder "${ring%%:*}.builder" create 8 1 1 >/dev/null
      swift-ring-builder "${ring%%:*}.builder" add "r1z1-127.0.0.1:${ring##*:}/d1" 100 >/dev/null
      swift-ring-builder "${ring%%:*}.builder" rebalance >/dev/null 2>&1 || true
    done
  )
  touch "$STATE/etc/configured-$PORT-v$CONFIG_VERSION"
}

alive() { [ -f "$STATE/run/$1.pid" ] && kill -0 "$(cat "$STATE/run/$1.pid")" 2>/dev/null; }

start() {
  if healthy; then return 0; fi
  install_missing
  hash_suffix
  configure
  if ! alive memcached; then
    memcached -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 64 -u "$(id -un)" -d -P "$STATE/run/memcached.pid"
  fi
  for server in "${SERVERS[@]}"; do
    alive "$server" && continue
    setsid "swift-$server-server" "$STATE/etc/$server-server.conf" >>"$STATE/log/$server.log" 2>&1 </dev/null &
    echo $! >"$STATE/run/$server.pid"
  done
  for _ in $(seq 1 300); do
    if healthy; then
      # tempauth answers once the account can be created: ask for a token until it works.
      if curl -fsS --max-time 2 -o /dev/null -H "X-Auth-User: $ACCOUNT:$USER" -H "X-Auth-Key: $KEY" "$ENDPOINT/auth/v1.0" 2>/dev/null; then
        log "ready at $ENDPOINT"
        return 0
      fi
    fi
    for server in "${SERVERS[@]}"; do
      if ! alive "$server"; then
        log "swift-$server-server exited; its log ($STATE/log/$server.log):"
        tail -n 20 "$STATE/log/$server.log" >&2 || true
        exit 1
      fi
    done
    sleep 0.1
  done
  log "no answer from $ENDPOINT/healthcheck after 30 s"
  exit 1
}

stop() {
  for server in proxy object container account memcached; do
    if alive "$server"; then
      kill "$(cat "$STATE/run/$server.pid")" 2>/dev/null || true
    fi
  done
  for _ in $(seq 1 50); do
    local running=0
    for server in proxy object container account memcached; do alive "$server" && running=1; done
    [ "$running" = 0 ] && break
    sleep 0.1
  done
  for server in proxy object container account memcached; do
    alive "$server" && kill -9 "$(cat "$STATE/run/$server.pid")" 2>/dev/null || true
    rm -f "$STATE/run/$server.pid"
  done
  return 0
}

# A tempauth token (Swift's own API; S3 requests sign with the keys instead).
token() {
  curl -fsS -D - -o /dev/null -H "X-Auth-User: $ACCOUNT:$USER" -H "X-Auth-Key: $KEY" "$ENDPOINT/auth/v1.0" \
    | tr -d '\r' | awk -F': ' 'tolower($1) == "x-auth-token" {print $2}'
}

public_read() {
  curl -fsS -o /dev/null -X POST -H "X-Auth-Token: $(token)" -H "X-Container-Read: .r:*" "$ENDPOINT/v1/AUTH_$ACCOUNT/$1"
}

# A Swift container is an S3 bucket; creating it again is harmless.
make_bucket() {
  curl -fsS -o /dev/null -X PUT -H "X-Auth-Token: $(token)" "$ENDPOINT/v1/AUTH_$ACCOUNT/$1"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) healthy ;;
  env)
    echo "PUSHMEDIA_S3_ENDPOINT=$ENDPOINT"
    echo "PUSHMEDIA_S3_REGION=us-east-1"
    echo "AWS_ACCESS_KEY_ID=$ACCOUNT:$USER"
    echo "AWS_SECRET_ACCESS_KEY=$KEY"
    echo "PUSHMEDIA_S3_PUBLIC_URL=$ENDPOINT/v1/AUTH_$ACCOUNT"
    ;;
  public-read) public_read "${2:?usage: object-store.sh public-read BUCKET}" ;;
  make-bucket) make_bucket "${2:?usage: object-store.sh make-bucket BUCKET}" ;;
  *) echo "usage: scripts/object-store.sh start|stop|restart|status|env|make-bucket BUCKET|public-read BUCKET" >&2; exit 64 ;;
esac
