#!/usr/bin/env bash
# The Debian package end to end, on this machine (root, Debian 12): builds it (scripts/deb.sh,
# from the binary scripts/release-static.sh staged), installs it with `apt-get install ./…deb`,
# and checks:
#   - the files, the conffile, the link in /usr/bin, `pushmedia --version`; that every shared
#     library the binary needs comes from a package in Depends, and no Swift library is needed;
#   - `systemd-analyze verify` accepts pushmedia.service;
#   - the unit's ExecStart runs as systemd would run it here (systemd is usually not PID 1 on these
#     machines, so this is emulated): the unit's Environment= lines, then /etc/default/pushmedia
#     (given a free PUSHMEDIA_PORT, as an administrator would), a clean environment, a user id
#     with no passwd entry as DynamicUser=yes gives, the state directory /var/lib/pushmedia as
#     StateDirectory=pushmedia makes it; /healthz and /readyz answer 200 (the store in the state
#     directory takes a write), /openapi.yaml is found beside the binary; SIGTERM → exit 0;
#   - `apt-get remove` removes the files and keeps the conffile; `apt-get purge` removes the
#     conffile and the state directory too.
# ExecReload (SIGHUP) reads the settings file (PUSHMEDIA_CONFIG) again: a new token takes effect.
# Skips (exit 0) only where there is no dpkg/apt-get or no root, and never when CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

T0=$(date +%s.%N)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
PASSED=0
ok() { PASSED=$((PASSED + 1)); echo "deb-test: ok - $*"; }
fail() {
  echo "deb-test: FAILED - $*" >&2
  [ -s "${work:-/nonexistent}/serve.err" ] && { echo "--- pushmedia serve's stderr" >&2; tail -20 "$work/serve.err" >&2; }
  echo "deb-test: $PASSED passed, 1 failed" >&2
  exit 1
}
skip() {
  if [ "${CI:-}" = true ]; then fail "$*"; fi
  echo "deb-test: SKIPPED: $*" >&2
  exit 0
}

command -v dpkg >/dev/null && command -v apt-get >/dev/null || skip "no dpkg/apt-get here"
[ "$(id -u)" = 0 ] || skip "installing a package needs root"

apt() { DEBIAN_FRONTEND=noninteractive apt-get -y -qq "$@" >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; return 1; }; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pushmedia-deb-test.XXXXXX")
server=""
cleanup() {
  set +e
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null
  if dpkg -s pushmedia >/dev/null 2>&1 && [ "${KEEP_INSTALLED:-0}" != 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq pushmedia >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if dpkg -s pushmedia >/dev/null 2>&1; then
  echo "deb-test: pushmedia is installed already: purging it first" >&2
  apt purge pushmedia
fi

# Build.
start=$(now)
DEB=$(scripts/deb.sh)
case $DEB in /*) ;; *) DEB=./${DEB#./} ;; esac  # apt-get takes a file by a path with a slash
DEB_SECONDS=$(since "$start")
VERSION=$(dpkg-deb -f "$DEB" Version)
ok "built $DEB in $DEB_SECONDS s"

# Install, with whatever Depends brings that is not here yet.
start=$(now)
if ! apt install "$DEB"; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  apt install "$DEB" || fail "apt-get install $DEB"
fi
INSTALL_SECONDS=$(since "$start")
[ "$(dpkg-query -W -f '${Status} ${Version}' pushmedia)" = "install ok installed $VERSION" ] \
  || fail "dpkg says: $(dpkg-query -W -f '${Status} ${Version}' pushmedia)"
ok "apt-get install $DEB in $INSTALL_SECONDS s"

# Files.
UNIT=/lib/systemd/system/pushmedia.service
for file in /usr/lib/pushmedia/pushmedia /usr/lib/pushmedia/PushMedia_PushMediaServer.resources/openapi.yaml \
  "$UNIT" /etc/default/pushmedia /usr/share/doc/pushmedia/copyright; do
  [ -f "$file" ] || fail "$file is missing"
done
[ "$(readlink -f /usr/bin/pushmedia)" = /usr/lib/pushmedia/pushmedia ] || fail "/usr/bin/pushmedia does not lead to the binary"
[ "$(/usr/bin/pushmedia --version)" = "$VERSION" ] || fail "pushmedia --version is not $VERSION"
dpkg-query -W -f '${Conffiles}\n' pushmedia | grep -q '^ /etc/default/pushmedia ' || fail "/etc/default/pushmedia is not a conffile"
[ "$(stat -c '%a %U' /etc/default/pushmedia)" = "640 root" ] || fail "/etc/default/pushmedia is $(stat -c '%a %U' /etc/default/pushmedia)"
ok "files in place; /usr/bin/pushmedia --version: $VERSION; /etc/default/pushmedia is a conffile"

# Every library the binary needs comes from a package it depends on.
depends=$(dpkg-query -W -f '${Depends}' pushmedia | tr ',' '\n' | sed 's/^ *//; s/[ (].*//')
ldd /usr/lib/pushmedia/pushmedia >"$work/ldd"
grep -q 'not found' "$work/ldd" && fail "missing libraries: $(grep 'not found' "$work/ldd")"
grep -Eq 'libswift|libFoundation|libdispatch' "$work/ldd" && fail "the binary needs Swift's libraries: $(grep -E 'libswift|libFoundation' "$work/ldd")"
for library in $(readelf -d /usr/lib/pushmedia/pushmedia | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  # "libfoo.so.1 => /path (…)", or the loader as "/path/ld-linux….so.2 (…)".
  path=$(awk -v l="$library" '$1 == l { print $3; exit } { n = split($1, p, "/"); if (n > 1 && p[n] == l) { print $1; exit } }' "$work/ldd")
  [ -n "$path" ] || fail "ldd does not show where $library comes from"
  owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
  echo "$depends" | grep -qx "$owner" || fail "$library ($path) comes from $owner, which is not in Depends: $depends"
done
ok "every NEEDED library comes from a package in Depends ($(echo "$depends" | paste -sd ' '))"

# The unit.
if ! systemd-analyze verify "$UNIT" >"$work/verify" 2>&1; then
  cat "$work/verify" >&2
  fail "systemd-analyze verify $UNIT"
fi
grep -i 'pushmedia' "$work/verify" && fail "systemd-analyze verify has remarks on the unit"
ok "systemd-analyze verify $UNIT"

# ExecStart as systemd would run it (emulated: systemd is PID 1 here only on some machines).
unit_value() { sed -n "s/^$1=//p" "$UNIT"; }
EXEC=$(unit_value ExecStart)
ENV_FILE=$(unit_value EnvironmentFile)
ENV_FILE=${ENV_FILE#-}
STATE=/var/lib/$(unit_value StateDirectory)
mapfile -t UNIT_ENV < <(unit_value Environment)
[ "$(unit_value DynamicUser)" = yes ] || fail "the unit has no DynamicUser=yes"
[ -n "$EXEC" ] && [ -f "$ENV_FILE" ] || fail "the unit's ExecStart or EnvironmentFile is missing"
# A free id in DynamicUser's range (61184-65519), with no passwd entry, as systemd allocates one.
uid=61184
while getent passwd "$uid" >/dev/null || getent group "$uid" >/dev/null; do uid=$((uid + 1)); done
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '\n# deb-test\nPUSHMEDIA_PORT=%s\nPUSHMEDIA_CONFIG=%s\n' "$PORT" "$STATE/pushmedia.yaml" >>"$ENV_FILE"
install -d -m 0755 -o "$uid" -g "$uid" "$STATE"
# A settings file with a token, which ExecReload (SIGHUP) replaces below.
printf 'token: [deb-test-first-token]\n' >"$STATE/pushmedia.yaml"
chmod 0644 "$STATE/pushmedia.yaml"
start=$(now)
(
  cd "$STATE"
  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    STATE_DIRECTORY="$STATE" "${UNIT_ENV[@]}" \
    bash -c 'set -a; . "$1"; set +a; shift; exec setpriv --reuid="$1" --regid="$1" --clear-groups --no-new-privs -- "${@:2}"' \
    _ "$ENV_FILE" "$uid" $EXEC
) >"$work/serve.out" 2>"$work/serve.err" &
server=$!
code=""
for _ in $(seq 200); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$PORT/healthz" || true)
  [ "$code" = 200 ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.05
done
START_SECONDS=$(since "$start")
[ "$code" = 200 ] || fail "$EXEC did not answer /healthz on 127.0.0.1:$PORT (last: $code)"
[ "$(stat -c %u "/proc/$server")" = "$uid" ] || fail "the server runs as uid $(stat -c %u "/proc/$server"), not $uid"
ok "'$EXEC' with the unit's environment and $ENV_FILE, as uid $uid: /healthz 200 after $START_SECONDS s"
code=$(curl -s -o "$work/readyz" -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")
[ "$code" = 200 ] || fail "/readyz answered $code: $(cat "$work/readyz")"
[ -d "$STATE/store" ] || fail "the store is not in $STATE/store"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/openapi.yaml")
[ "$code" = 200 ] || fail "/openapi.yaml answered $code (the resource bundle beside the binary)"
ok "/readyz 200 with the store in $STATE/store; /openapi.yaml 200"

# ExecReload: the settings file read again, its new token in force at once, the process the same.
process() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
  --data '{}' "http://127.0.0.1:$PORT/v1/process"; }
[ "$(process deb-test-first-token)" = 200 ] || fail "the settings file's token was not accepted"
printf 'token: [deb-test-second-token]\n' >"$STATE/pushmedia.yaml"
RELOAD=$(unit_value ExecReload)
[ -n "$RELOAD" ] || fail "the unit has no ExecReload"
${RELOAD//\$MAINPID/$server}
for _ in $(seq 100); do
  [ "$(process deb-test-second-token)" = 200 ] && break
  sleep 0.05
done
[ "$(process deb-test-second-token)" = 200 ] || fail "after ExecReload the new token is not accepted"
[ "$(process deb-test-first-token)" = 401 ] || fail "after ExecReload the old token is still accepted"
kill -0 "$server" 2>/dev/null || fail "ExecReload ended the server"
grep -q 'settings reloaded' "$work/serve.err" || fail "no 'settings reloaded' line: $(tail -5 "$work/serve.err")"
ok "ExecReload ('$RELOAD'): the settings file read again, the new token in force, the same process"

start=$(now)
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
STOP_SECONDS=$(since "$start")
[ "$status" = 0 ] || fail "after SIGTERM the server exited with $status"
ok "SIGTERM: exit 0 after $STOP_SECONDS s"

# Remove keeps the conffile; purge takes it and the state directory.
apt remove pushmedia || fail "apt-get remove pushmedia"
for file in /usr/lib/pushmedia /usr/bin/pushmedia "$UNIT" /usr/share/doc/pushmedia; do
  [ -e "$file" ] || [ -L "$file" ] && fail "$file is still there after apt-get remove"
done
[ -f /etc/default/pushmedia ] || fail "apt-get remove removed the conffile"
[ "$(dpkg-query -W -f '${Status}' pushmedia)" = "deinstall ok config-files" ] || fail "after remove: $(dpkg-query -W -f '${Status}' pushmedia)"
ok "apt-get remove: files gone, /etc/default/pushmedia kept"
apt purge pushmedia || fail "apt-get purge pushmedia"
for file in /etc/default/pushmedia "$STATE" /var/lib/private/pushmedia; do
  [ -e "$file" ] && fail "$file is still there after apt-get purge"
done
dpkg -s pushmedia >/dev/null 2>&1 && fail "dpkg still knows pushmedia after purge"
ok "apt-get purge: /etc/default/pushmedia and $STATE gone"

echo "deb-test: timings: deb build $DEB_SECONDS s ($(du -m "$DEB" | cut -f1) MB), install $INSTALL_SECONDS s, start until /healthz 200 $START_SECONDS s, stop $STOP_SECONDS s, whole test $(since "$T0") s"
echo "deb-test: $PASSED passed, 0 failed"
