#!/usr/bin/env bash
# The container image's size and start: `podman image inspect` Size, and N times (default 10)
# `podman run -d` of the image as shipped (a token, the store on a fresh volume, read-only root)
# until /healthz answers 200, then `podman stop` (SIGTERM) until it has exited 0.
#   bench/image.sh [IMAGE] [N]      IMAGE defaults to localhost/pushmedia:latest (make image)
# Prints each run and the median, minimum and maximum of both.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/container-env.sh
IMAGE=${1:-localhost/pushmedia:latest}
N=${2:-10}
container_setup || { echo "bench/image: $CONTAINER_PROBLEM" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
starts=()
stops=()
for i in $(seq "$N"); do
  port=$(free_port)
  name=pushmedia-bench-image-$$-$i
  start=$(now)
  podman run -d --name "$name" --read-only --tmpfs /tmp -p "127.0.0.1:$port:8080" -v "$name:/var/lib/pushmedia" \
    -e PUSHMEDIA_TOKENS=bench "$IMAGE" >/dev/null 2>&1
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/healthz" || true)" = 200 ]; do
    sleep 0.01
  done
  started=$(since "$start")
  start=$(now)
  podman stop -t 30 "$name" >/dev/null 2>&1
  stopped=$(since "$start")
  [ "$(podman inspect --format '{{.State.ExitCode}}' "$name")" = 0 ] || { echo "bench/image: run $i did not exit 0" >&2; exit 1; }
  podman rm -f "$name" >/dev/null 2>&1
  podman volume rm -f "$name" >/dev/null 2>&1
  echo "run $i: /healthz 200 after $started s, stopped (exit 0) after $stopped s"
  starts+=("$started")
  stops+=("$stopped")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "median %.2f s, min %.2f s, max %.2f s", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
echo "image $IMAGE: $((size / 1000000)) MB (podman image inspect Size)"
echo "podman run -d until /healthz 200: $(stats "${starts[@]}")"
echo "podman stop until exited 0: $(stats "${stops[@]}")"
