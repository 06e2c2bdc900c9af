#!/usr/bin/env bash
# The container image end to end, with Debian's podman (installed when missing; see
# scripts/container-env.sh for what these machines need):
#   scripts/image-test.sh          # `make test`: the runtime stage around the release binary in
#                                  # .build-static/stage (scripts/release-static.sh), no compiler
#   scripts/image-test.sh --full   # `make image-test`: the whole Containerfile, compile stage too
#   scripts/image-test.sh --lean   # the runtime stage around the release binary, the `media`
#                                  # stage built first if podman has not got it (about 20 min)
# On a machine whose podman has not built the `media` stage (libvips, FFmpeg, libheif and
# libcurl compiled), the default tests the image's stand-in around Debian's own libraries
# instead (`--target prebuilt-debian`, minutes): the same runtime stage, root assembly, user,
# volume, healthcheck and entrypoint, the same checks below except what the image holds (step
# 7: Debian's libraries are not the lean list). .ci/run then runs `--lean`, so CI checks the
# image that ships on every machine, and `make test` after it finds `media` in the cache. The
# flavour tested is written to .build/packaging/image-media.
# Then, against the image:
#   - without PUSHMEDIA_TOKENS (or another auth setting) the container refuses to start (exit 64);
#   - with a token (and a read-only root file system, /tmp a tmpfs) it answers /healthz 200 on a
#     published port, and its HEALTHCHECK (run with `podman healthcheck run`: podman schedules
#     healthchecks with systemd timers, absent here) reports healthy; /readyz is ready (the
#     store on the volume takes a write, libvips works);
#   - POST /v1/process of payloads whose media_url points at a Python http.server on the host
#     (reached through the podman bridge's gateway, allowed with PUSHMEDIA_TRUSTED_PEERS): a
#     WebP comes back `processed` as a JPEG (libvips), a WebM as an MP4 (ffmpeg), and each
#     attachment is fetched from the container's /media/…; without the token: 401;
#   - a media URL (GET /insecure/pr:ios/plain/<source>@jpg, the source allowed with
#     PUSHMEDIA_URL_ALLOW_SOURCE) answers a JPEG named for the phone;
#   - the stored files are in the volume, and a new container on the same volume serves them;
#   - `podman stop` (SIGTERM) ends the container with exit code 0 within the grace period;
#   - the image holds exactly docs/deployment.md's list of files, none of ImageMagick, poppler,
#     X11, GL, LLVM, … or a package manager (scripts/image-contents.sh --check), within 200 MB;
#   - parity: samples/ and the formats it lacks (Tests/image/parity.py) through `pushmedia batch`
#     on the host (Debian's libvips and FFmpeg) and in the image (built with only what PushMedia
#     uses), for iOS and Android: the same status, reason, types and dimensions for every payload;
#   - deploy/kubernetes with `podman kube play`: ready, a payload processed, SIGTERM exits 0.
# Prints the timings (build, start until /healthz answers, stop) and the image's size.
# Skips (exit 0) only when podman cannot run here at all, and never when CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/container-env.sh

IMAGE_ARGS=()
MEDIA=auto
for argument in "$@"; do
  case $argument in
    --full) IMAGE_ARGS=(--full) MEDIA=lean ;;
    --lean) MEDIA=lean ;;
    *) echo "usage: scripts/image-test.sh [--full|--lean]" >&2; exit 64 ;;
  esac
done

T0=$(now)
mkdir -p "$CACHE"
if ! container_setup; then
  if [ "${CI:-}" = true ]; then
    log "FAILED: $CONTAINER_PROBLEM"
    exit 1
  fi
  log "SKIPPED: $CONTAINER_PROBLEM"
  exit 0
fi

VERSION=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/PushMedia/Support/Version.swift)
export IMAGE=${IMAGE:-localhost/pushmedia:$VERSION}
ensure_base_image || { log "FAILED: the base image"; exit 1; }
if [ "$MEDIA" = auto ]; then
  if podman image exists "$(media_image)"; then MEDIA=lean; else MEDIA=debian; fi
fi
echo "$MEDIA" >"$CACHE/image-media"
if [ "$MEDIA" = debian ]; then
  log "the media stage is not built here yet: testing the image around Debian's libraries" \
    "(scripts/image-test.sh --lean builds and tests the image that ships)"
  IMAGE_ARGS=(--debian)
fi
build_start=$(now)
scripts/image.sh "${IMAGE_ARGS[@]}"
BUILD_SECONDS=$(since "$build_start")

TOKEN=image-test-$RANDOM$RANDOM
# The volumes there were before: the test's own (named or not) are removed at the end.
VOLUMES_BEFORE=$(podman volume ls -q | sort)
NAME=pushmedia-image-test-$$
VOLUME=pushmedia-image-test-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/pushmedia-image-test.XXXXXX")
origin=""
containers=()
PASSED=0
cleanup() {
  set +e
  local container
  [ -n "$origin" ] && kill "$origin" 2>/dev/null && wait "$origin" 2>/dev/null
  for container in "${containers[@]}"; do podman rm -f -v -t 0 "$container" >/dev/null 2>&1 || true; done
  podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  if [ "${KUBE_UP:-0}" = 1 ]; then podman kube down "$KUBE" >/dev/null 2>&1 || true; fi
  podman secret rm pushmedia >/dev/null 2>&1 || true
  # The volumes the containers and kube play made (the claim's, the ConfigMap's, anonymous ones).
  if [ -n "${VOLUMES_BEFORE+set}" ]; then
    comm -13 <(echo "$VOLUMES_BEFORE") <(podman volume ls -q | sort) | xargs -r podman volume rm -f >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

ok() { PASSED=$((PASSED + 1)); echo "image-test: ok - $*"; }
fail() {
  echo "image-test: FAILED - $*" >&2
  local container
  for container in "${containers[@]}"; do
    echo "--- podman logs $container" >&2
    podman logs "$container" 2>&1 | grep -v 'systemd connection' | tail -30 >&2 || true
  done
  echo "image-test: $PASSED passed, 1 failed" >&2
  exit 1
}
# podman without systemd says on every run that it cannot schedule the healthcheck: not news.
quiet() { grep -v 'unable to get systemd connection\|Removing timer for container' >&2 || true; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# JSON field of stdin, by a Python expression on `d`.
json() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

# 1. No auth, no start: the image listens on 0.0.0.0.
status=0
podman run --rm --name "$NAME-noauth" "$IMAGE" >"$work/noauth.out" 2>"$work/noauth.err" || status=$?
[ "$status" = 64 ] && grep -q 'without auth' "$work/noauth.err" \
  || fail "without PUSHMEDIA_TOKENS the container should refuse to start (exit 64), got $status: $(cat "$work/noauth.err")"
ok "without auth settings the container refuses to start: $(grep -o 'refusing.*' "$work/noauth.err" | head -1)"

# 2. Start with a token, the store on a named volume, the hook on a free loopback port, and the
#    root file system read-only (/tmp a tmpfs), as docs/deployment.md says it can run.
PORT=$(free_port)
ORIGIN_PORT=$(free_port)
GATEWAY=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}' | head -1)
[ -n "$GATEWAY" ] || fail "podman's default network has no gateway address"
BASE=http://127.0.0.1:$PORT
podman volume create "$VOLUME" >/dev/null
start=$(now)
podman run -d --name "$NAME" --read-only --tmpfs /tmp -p "127.0.0.1:$PORT:8080" -v "$VOLUME:/var/lib/pushmedia" \
  -e "PUSHMEDIA_TOKENS=$TOKEN" -e "PUSHMEDIA_BASE_URL=$BASE/media" \
  -e "PUSHMEDIA_TRUSTED_PEERS=$GATEWAY:$ORIGIN_PORT" -e "PUSHMEDIA_URL_ALLOW_SOURCE=http://$GATEWAY:$ORIGIN_PORT/" \
  "$IMAGE" >/dev/null 2> >(quiet)
containers+=("$NAME")
code=""
for _ in $(seq 300); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$BASE/healthz" || true)
  [ "$code" = 200 ] && break
  [ "$(podman inspect --format '{{.State.Running}}' "$NAME")" = true ] || break
  sleep 0.05
done
START_SECONDS=$(since "$start")
[ "$code" = 200 ] || fail "/healthz did not answer 200 (last: $code)"
ok "started (read-only root, /tmp a tmpfs); /healthz answered 200 after $START_SECONDS s (podman run -d included)"

# 3. The image's HEALTHCHECK.
podman healthcheck run "$NAME" 2> >(quiet) >/dev/null || fail "podman healthcheck run: unhealthy"
health=$(podman inspect --format '{{.State.Health.Status}}' "$NAME")
[ "$health" = healthy ] || fail "health status is '$health', not healthy"
ok "HEALTHCHECK reports healthy"
code=$(curl -s -o "$work/readyz" -w '%{http_code}' "$BASE/readyz")
[ "$code" = 200 ] || fail "/readyz answered $code: $(cat "$work/readyz")"
ok "/readyz is ready: $(cat "$work/readyz")"

# 4. Media from an origin on the host, through the container's fetcher, libvips and ffmpeg.
mkdir -p "$work/origin"
cp samples/media/banner.webp samples/media/clip.webm "$work/origin/"
(cd "$work/origin" && exec python3 -m http.server "$ORIGIN_PORT" --bind "$GATEWAY") >"$work/origin.log" 2>&1 &
origin=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://$GATEWAY:$ORIGIN_PORT/banner.webp" && break
  sleep 0.05
done

process() {  # source file → the answer's JSON in $work/answer.json
  local payload
  payload=$(printf '{"aps": {"alert": {"title": "Image test", "body": "%s"}, "mutable-content": 1}, "media_url": "http://%s:%s/%s"}' \
    "$1" "$GATEWAY" "$ORIGIN_PORT" "$1")
  curl -sS -o "$work/answer.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --data "$payload" "$BASE/v1/process"
}
check_processed() {  # source expected-mime magic-hex
  local code status url mime bytes
  code=$(process "$1")
  [ "$code" = 200 ] || fail "POST /v1/process ($1) answered $code: $(cat "$work/answer.json")"
  status=$(json 'd["outcome"]["status"]' <"$work/answer.json")
  [ "$status" = processed ] || fail "$1 came back $status: $(cat "$work/answer.json")"
  url=$(json 'd["outcome"]["attachment"]["url"]' <"$work/answer.json")
  mime=$(json 'd["outcome"]["attachment"]["mime"]' <"$work/answer.json")
  bytes=$(json 'd["outcome"]["attachment"]["bytes"]' <"$work/answer.json")
  [ "$mime" = "$2" ] || fail "$1 became $mime, not $2"
  case $url in "$BASE/media/"*) ;; *) fail "attachment URL $url is not under $BASE/media/" ;; esac
  code=$(curl -sS -o "$work/attachment" -w '%{http_code} %{content_type}' "$url")
  [ "$code" = "200 $2" ] || fail "GET $url answered $code"
  [ "$(stat -c %s "$work/attachment")" = "$bytes" ] || fail "GET $url: $(stat -c %s "$work/attachment") bytes, the outcome says $bytes"
  od -A n -t x1 -N 8 "$work/attachment" | tr -d ' \n' | grep -q "$3" || fail "GET $url: not a $2 file"
  STORED+=("${url##*/}")
  ok "$1 from the host's origin came back processed as $mime ($bytes bytes), served at ${url#"$BASE"}"
}
STORED=()
check_processed banner.webp image/jpeg '^ffd8ff'
check_processed clip.webm video/mp4 '^........66747970'  # ftyp

code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data '{}' "$BASE/v1/process")
[ "$code" = 401 ] || fail "POST /v1/process without the token answered $code, not 401"
ok "POST /v1/process without the token: 401"

# The store is in the volume.
mountpoint=$(podman volume inspect --format '{{.Mountpoint}}' "$VOLUME")
for name in "${STORED[@]}"; do
  [ -n "$(find "$mountpoint/store" -name "$name" -print -quit)" ] || fail "$name is not in the volume ($mountpoint)"
done
ok "the attachments are stored in the volume (${#STORED[@]} files under /var/lib/pushmedia/store)"

# A media URL (unsigned, its source under PUSHMEDIA_URL_ALLOW_SOURCE): a JPEG made for iOS.
url="$BASE/insecure/pr:ios/plain/http://$GATEWAY:$ORIGIN_PORT/banner.webp@jpg"
code=$(curl -sS -D "$work/url.headers" -o "$work/url.jpg" -w '%{http_code} %{content_type}' "$url")
[ "$code" = "200 image/jpeg" ] || fail "the media URL $url answered $code: $(head -c 300 "$work/url.jpg")"
od -A n -t x1 -N 3 "$work/url.jpg" | tr -d ' \n' | grep -q '^ffd8ff' || fail "the media URL's answer is not a JPEG"
grep -qi '^content-disposition: inline; filename="banner.jpg"' "$work/url.headers" \
  || fail "the media URL's answer names no banner.jpg: $(cat "$work/url.headers")"
ok "a media URL (GET /insecure/pr:ios/plain/<source>@jpg) answered a JPEG saved as banner.jpg"

# HTTPS through the libcurl built here: it trusts the CA certificates at
# /etc/ssl/certs/ca-certificates.crt. `pushmedia process` in a container of its own, against an
# HTTPS origin on the host whose test CA is mounted over that file: processed; with the image's
# own file (which does not hold the test CA): refused for the certificate.
TLS_PORT=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" \
  -days 1 -subj "/CN=image test CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/tls.key" -out "$work/tls.csr" \
  -subj "/CN=$GATEWAY" 2>/dev/null
printf 'subjectAltName=IP:%s\n' "$GATEWAY" >"$work/tls.ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -out "$work/tls.pem" \
  -days 1 -extfile "$work/tls.ext" 2>/dev/null
python3 - "$GATEWAY" "$TLS_PORT" "$work/tls.pem" "$work/tls.key" "$work/origin" >"$work/tls-origin.log" 2>&1 <<'PY' &
import functools, http.server, ssl, sys
host, port, cert, key, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
server = http.server.ThreadingHTTPServer((host, port), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
PY
tls_origin=$!
for _ in $(seq 100); do
  curl -s --cacert "$work/ca.pem" -o /dev/null "https://$GATEWAY:$TLS_PORT/banner.webp" && break
  sleep 0.05
done
tls_process() {  # [podman run arguments...] → the rewritten payload's pushmedia.status and .reason
  printf '{"aps": {"alert": "HTTPS"}, "media_url": "https://%s:%s/banner.webp"}' "$GATEWAY" "$TLS_PORT" |
    podman run --rm -i --read-only --tmpfs /tmp "$@" -e "PUSHMEDIA_TRUSTED_PEERS=$GATEWAY:$TLS_PORT" "$IMAGE" \
      process --store /tmp/store --base-url https://media.example/m - 2>>"$work/tls.err" |
    json 'd["pushmedia"]["status"] + " " + str(d["pushmedia"].get("reason"))'
}
answer=$(tls_process -v "$work/ca.pem:/etc/ssl/certs/ca-certificates.crt:ro")
[ "$answer" = "processed None" ] || fail "HTTPS with the test CA trusted: $answer: $(tail -3 "$work/tls.err")"
answer=$(tls_process)
case $answer in rejected\ *) ;; *) fail "HTTPS from an origin the image does not trust: $answer" ;; esac
kill "$tls_origin" 2>/dev/null || true
ok "HTTPS through the image's libcurl: processed with the origin's CA in ca-certificates.crt, $answer without"

# 5. SIGTERM: a graceful stop, exit code 0, well within the grace period.
GRACE=30
start=$(now)
podman stop -t "$GRACE" "$NAME" >/dev/null 2> >(quiet)
STOP_SECONDS=$(since "$start")
state=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$NAME")
[ "$state" = "exited 0" ] || fail "after podman stop the container is '$state', not 'exited 0'"
awk -v s="$STOP_SECONDS" -v g="$GRACE" 'BEGIN { exit !(s < g) }' || fail "stopping took $STOP_SECONDS s, the grace period is $GRACE s"
ok "podman stop (SIGTERM): exited 0 after $STOP_SECONDS s (grace period $GRACE s)"

# 6. A new container on the same volume (writable root this time) serves what the first stored.
podman run -d --name "$NAME-again" -p "127.0.0.1:$PORT:8080" -v "$VOLUME:/var/lib/pushmedia" \
  -e "PUSHMEDIA_TOKENS=$TOKEN" -e "PUSHMEDIA_BASE_URL=$BASE/media" "$IMAGE" >/dev/null 2> >(quiet)
containers+=("$NAME-again")
for _ in $(seq 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$BASE/healthz" || true)" = 200 ] && break
  sleep 0.05
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/media/${STORED[0]}")
[ "$code" = 200 ] || fail "a new container on the volume answered $code for /media/${STORED[0]}"
podman stop -t "$GRACE" "$NAME-again" >/dev/null 2> >(quiet)
[ "$(podman inspect --format '{{.State.ExitCode}}' "$NAME-again")" = 0 ] || fail "the second container did not exit 0"
ok "a new container on the same volume serves /media/${STORED[0]}, and stops with 0"

# 7. What the image holds: exactly docs/deployment.md's list, nothing forbidden, within 200 MB.
#    (The stand-in around Debian's libraries holds theirs: not checked.)
if [ "$MEDIA" = lean ]; then
  scripts/image-contents.sh "$IMAGE" --check >"$work/contents" 2>&1 || fail "$(cat "$work/contents")"
  SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
  [ "$SIZE" -le 200000000 ] || fail "the image is $((SIZE / 1000000)) MB, over 200 MB"
  ok "$(cat "$work/contents"); $((SIZE / 1000000)) MB"
fi

# 8. Parity: the image's libvips and FFmpeg (only what PushMedia uses) against the host's
#    Debian builds: the same payloads, every corpus format, for iOS and Android; the outcomes'
#    status, reason, source type, attachment type and dimensions must agree. The video and audio
#    transcodes (H.264/AAC MP4, AAC M4A, poster frames) run inside the image.
#    The host runs the image's own binary (copied out of it), so the libraries are the only
#    difference.
python3 Tests/image/parity.py corpus "$work/corpus"
mkdir -m 1777 "$work/parity"
copy=$(podman create "$IMAGE" health)
podman cp "$copy:/usr/lib/pushmedia" "$work/host-pushmedia" || fail "cannot copy the binary out of the image"
podman rm -v "$copy" >/dev/null 2> >(quiet)
for profile in ios android; do
  "$work/host-pushmedia/pushmedia" batch "$work/corpus" --out "$work/parity/host-$profile" --store "$work/parity/host-store-$profile" \
    --profile "$profile" >/dev/null 2>"$work/parity/host-$profile.err" \
    || fail "the host's batch ($profile): $(tail -3 "$work/parity/host-$profile.err")"
  podman run --rm --read-only --tmpfs /tmp --tmpfs /var/lib/pushmedia -v "$work/corpus:/corpus:ro" -v "$work/parity:/parity" "$IMAGE" \
    batch /corpus --out "/parity/image-$profile" --store "/parity/image-store-$profile" --profile "$profile" \
    >/dev/null 2>"$work/parity/image-$profile.err" \
    || fail "the image's batch ($profile): $(tail -3 "$work/parity/image-$profile.err")"
  python3 Tests/image/parity.py compare "$work/parity/host-$profile/report.json" \
    "$work/parity/image-$profile/report.json" >"$work/parity/$profile.txt" 2>&1 \
    || fail "$profile: $(cat "$work/parity/$profile.txt")"
  ok "$profile: $(cat "$work/parity/$profile.txt")"
done

# 9. Kubernetes: the single-node manifests (deploy/kubernetes) with `podman kube play`, which has
#    no Services: the pod's port is published on a loopback port of the host instead, the token
#    is the test's, the pod is on podman's default network (kube play makes one of its own),
#    and the origin above is a trusted peer (in the Secret). Every ConfigMap's settings file, with
#    the token its Secret gives in the environment (as the pod has it), is what `check-config`
#    calls valid.
for manifest in deploy/kubernetes/configmap.yaml deploy/kubernetes/fleet/configmap.yaml; do
  awk '/pushmedia.yaml: [|]/ { on = 1; next } on { sub(/^    /, ""); print }' "$manifest" \
    | sed "s|/etc/pushmedia/secret/fleet-db-password|$work/fleet-db-password|" >"$work/settings.yaml"
  echo secret >"$work/fleet-db-password" && chmod 600 "$work/fleet-db-password"
  PUSHMEDIA_TOKENS=the-secret-gives-it "$work/host-pushmedia/pushmedia" check-config "$work/settings.yaml" \
    >"$work/check-config" 2>&1 || fail "$manifest: $(cat "$work/check-config")"
done
ok "the ConfigMaps' settings files are valid (pushmedia check-config)"
KPORT=$(free_port)
KUBE=$work/kube.yaml
# Debian's podman 4.3 stores a Secret manifest as YAML but reads a secretRef's podman secret as
# a JSON map of base64 values, so the test makes that podman secret itself from secret.yaml's
# stringData.
python3 - deploy/kubernetes/secret.yaml "$TOKEN" "$GATEWAY:$ORIGIN_PORT" >"$work/secret.json" <<'PY'
import base64, json, re, sys
data, on = {}, False
for line in open(sys.argv[1]):
    if line.startswith("stringData:"):
        on = True
    elif on and (match := re.match(r'^  ([A-Za-z0-9_.-]+): "(.*)"$', line.rstrip("\n"))):
        data[match[1]] = match[2]
    elif on:
        break
assert "PUSHMEDIA_TOKENS" in data, "secret.yaml has no PUSHMEDIA_TOKENS"
data.update(PUSHMEDIA_TOKENS=sys.argv[2], PUSHMEDIA_TRUSTED_PEERS=sys.argv[3])
encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
print(json.dumps(encoded))
PY
podman secret create pushmedia "$work/secret.json" >/dev/null
{
  cat deploy/kubernetes/configmap.yaml
  echo ---; cat deploy/kubernetes/pvc.yaml
  echo ---; sed -e "s|^\( *\)containerPort: 8080|&\n\1hostPort: $KPORT\n\1hostIP: 127.0.0.1|" \
    -e "s|image: localhost/pushmedia:latest|image: $IMAGE|" deploy/kubernetes/deployment.yaml
} >"$KUBE"
KUBE_UP=1
podman kube play --network podman "$KUBE" >"$work/kube.out" 2>&1 || fail "podman kube play: $(cat "$work/kube.out")"
KUBEBASE=http://127.0.0.1:$KPORT
start=$(now)
for _ in $(seq 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$KUBEBASE/readyz" || true)" = 200 ] && break
  sleep 0.05
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$KUBEBASE/readyz")" = 200 ] \
  || fail "the kube pod is not ready: $(podman pod ps; podman ps -a --format '{{.Names}} {{.Status}}')"
ok "podman kube play: the pod is ready (/readyz 200) after $(since "$start") s"
KUBECONTAINER=$( (podman ps --format '{{.Names}}' | grep -- '^pushmedia-pod-.*-pushmedia$' | head -1) || true)
[ -n "$KUBECONTAINER" ] || fail "no container of the kube pod: $(podman ps --format '{{.Names}}')"
# The Deployment's securityContext, as podman applied it.
context=$(podman inspect --format '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}}' "$KUBECONTAINER")
case $context in
  "10001:10001 true "*ALL* | "10001:10001 true "*CAP_CHOWN*CAP_SETUID*) ;;
  *) fail "the kube container runs as '$context', not 10001 with a read-only root and no capabilities" ;;
esac
ok "the kube container runs as 10001:10001, read-only root, capabilities dropped"
code=$(BASE=$KUBEBASE process banner.webp)
[ "$code" = 200 ] && [ "$(json 'd["outcome"]["status"]' <"$work/answer.json")" = processed ] \
  || fail "the kube pod did not process a payload ($code): $(cat "$work/answer.json")"
ok "the kube pod processed a payload: $(json 'd["outcome"]["attachment"]["mime"]' <"$work/answer.json")"
# A kubelet stops a pod with SIGTERM and waits out the grace period; Debian's podman 4.3
# `kube down` removes the pod by force (SIGKILL, exit 137, measured), so the pod is stopped as a
# kubelet would first (`podman pod stop`: SIGTERM, then the container's stop timeout), then
# taken down.
start=$(now)
podman pod stop "${KUBECONTAINER%-pushmedia}" >"$work/kube.stop" 2>&1 || fail "podman pod stop: $(cat "$work/kube.stop")"
state=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$KUBECONTAINER")
[ "$state" = "exited 0" ] || fail "after podman pod stop the kube container is '$state', not 'exited 0'"
ok "the kube pod stopped gracefully on SIGTERM (exit 0) in $(since "$start") s"
podman kube down "$KUBE" >"$work/kube.down" 2>&1 || fail "podman kube down: $(cat "$work/kube.down")"
KUBE_UP=0
ok "podman kube down removed the pod"

SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "image-test: timings: build $BUILD_SECONDS s ($([ "${IMAGE_ARGS[*]}" = --full ] && echo "whole Containerfile" || echo "runtime stage around the prebuilt binary")$([ "$MEDIA" = debian ] && echo ", Debian's libraries")), start until /healthz 200 $START_SECONDS s, stop $STOP_SECONDS s, whole test $(since "$T0") s; image $IMAGE $((SIZE / 1000000)) MB"
echo "image-test: $PASSED passed, 0 failed"
