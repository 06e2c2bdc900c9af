#!/usr/bin/env bash
# A real PostgreSQL for the fleet's tests and benchmarks: Debian's server packages, a cluster of
# its own on 127.0.0.1 (not Debian's default cluster), password authentication (SCRAM-SHA-256)
# over TCP, a role and a database for PushMedia.
#
#   scripts/postgres.sh start    install what is missing, make the cluster once, start, wait until ready
#   scripts/postgres.sh stop     stop the server (fast shutdown: sessions are cut)
#   scripts/postgres.sh status   exit 0 when the server accepts connections
#   scripts/postgres.sh env      print the settings to reach it (shell assignments)
#   scripts/postgres.sh psql ... psql as the superuser, on the cluster
#
# Idempotent: `start` on a running server returns at once. State (data, socket, log) lives in
# $PUSHMEDIA_POSTGRES_DIR (default /var/tmp/pushmedia-postgres); port $PUSHMEDIA_POSTGRES_PORT
# (default 55432). The role is "pushmedia", its password "pushmedia-testing-secret" (also in
# $PUSHMEDIA_POSTGRES_DIR/password), the database "pushmedia". The server offers TLS too, with a
# certificate for 127.0.0.1 and localhost from a CA of its own ($PUSHMEDIA_POSTGRES_DIR/tls/ca.pem),
# so that sslmode=require and verify-full can be tried; sslmode=disable works as well.
set -euo pipefail

STATE=${PUSHMEDIA_POSTGRES_DIR:-/var/tmp/pushmedia-postgres}
PORT=${PUSHMEDIA_POSTGRES_PORT:-55432}
DATA=$STATE/data
PASSWORD=pushmedia-testing-secret

log() { echo "postgres: $*" >&2; }

bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

install_missing() {
  bindir >/dev/null && command -v psql >/dev/null && return 0
  log "installing postgresql"
  local sudo=""
  [ "$(id -u)" != 0 ] && sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql postgresql-client >&2 \
    || { $sudo apt-get update >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql postgresql-client >&2; }
}

# Runs a command as the cluster's owner: "postgres" when this is root (the server refuses root).
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

status() {
  local bin
  bin=$(bindir) || return 1
  as_owner "$bin/pg_isready" -q -h 127.0.0.1 -p "$PORT" 2>/dev/null
}

start() {
  install_missing
  local bin
  bin=$(bindir)
  status && [ -f "$STATE/tls/server.key" ] && return 0
  mkdir -p "$STATE"
  [ "$(id -u)" = 0 ] && chown postgres: "$STATE"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "making the cluster in $DATA"
    printf '%s\n' "$PASSWORD" > "$STATE/password"
    chmod 0644 "$STATE/password"
    as_owner "$bin/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $PORT"
      echo "unix_socket_directories = '$STATE'"
      echo "max_connections = 200"
      echo "fsync = off"
      echo "synchronous_commit = off"
      echo "full_page_writes = off"
    } | as_owner tee -a "$DATA/postgresql.conf" >/dev/null
  fi
  make_certificates
  status || as_owner "$bin/pg_ctl" -D "$DATA" -l "$STATE/server.log" -w -t 30 start >/dev/null \
    || { tail -20 "$STATE/server.log" >&2; exit 1; }
  as_owner "$bin/psql" -h "$STATE" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >/dev/null <<SQL
SELECT 'CREATE ROLE pushmedia LOGIN'
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pushmedia') \gexec
ALTER ROLE pushmedia PASSWORD '$PASSWORD';
SELECT 'CREATE DATABASE pushmedia OWNER pushmedia'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'pushmedia') \gexec
ALTER SYSTEM SET ssl_cert_file = '$STATE/tls/server.pem';
ALTER SYSTEM SET ssl_key_file = '$STATE/tls/server.key';
ALTER SYSTEM SET ssl = on;
SELECT pg_reload_conf();
SQL
  log "ready on 127.0.0.1:$PORT"
}

# A CA of the cluster's own and a server certificate it signed, for 127.0.0.1 and localhost.
make_certificates() {
  local tls=$STATE/tls
  [ -f "$tls/server.key" ] && return 0
  command -v openssl >/dev/null || { apt-get install -y -qq openssl >&2 || { apt-get update -qq && apt-get install -y -qq openssl >&2; }; }
  mkdir -p "$tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 -subj "/CN=PushMedia test PostgreSQL CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$tls/server.key.new" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth\n' > "$tls/server.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 3650 \
    -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null
  chmod 0600 "$tls/server.key.new" "$tls/ca.key"
  chmod 0644 "$tls/ca.pem" "$tls/server.pem"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$tls"
  mv "$tls/server.key.new" "$tls/server.key"
}

stop() {
  local bin
  bin=$(bindir) || return 0
  [ -f "$DATA/postmaster.pid" ] || return 0
  as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env)
    echo "PUSHMEDIA_TEST_FLEET_DB=postgres://pushmedia@127.0.0.1:$PORT/pushmedia?sslmode=disable"
    echo "PUSHMEDIA_TEST_FLEET_DB_PASSWORD_FILE=$STATE/password"
    echo "PUSHMEDIA_TEST_FLEET_DB_CA=$STATE/tls/ca.pem"
    ;;
  psql) shift; as_owner "$(bindir)/psql" -h "$STATE" -p "$PORT" -U postgres -d pushmedia "$@" ;;
  *) echo "usage: $0 start|stop|status|env|psql ..." >&2; exit 64 ;;
esac
