# shellcheck shell=bash
# Sourced by scripts/image.sh and scripts/image-test.sh: podman on a Debian machine without a
# registry.
#   container_setup              podman (and runc, netavark, debootstrap, …) from Debian's packages
#                                when missing; CONTAINERS_CONF for Debian 12's podman 4.3; returns 1
#                                (with CONTAINER_PROBLEM set) when podman cannot run here
#   ensure_base_image            localhost/debian:bookworm-slim, made with debootstrap (cached)
#   ensure_swift_image           localhost/swift:6.3-bookworm: the base, the packages of the official
#                                swift:6.3-bookworm image, and this machine's toolchain (/opt/swift)
# Debian 12's podman works with runc (crun fails on hybrid cgroups) and with default ulimits
# below the machine's hard limits (otherwise setrlimit is refused when a container starts).

CACHE=${PUSHMEDIA_IMAGE_CACHE:-.build/packaging}
BASE_IMAGE=localhost/debian:bookworm-slim
SWIFT_IMAGE=localhost/swift:6.3-bookworm
SWIFT_TOOLCHAIN=${SWIFT_TOOLCHAIN:-/opt/swift}
# Where SwiftPM finds the dependencies when github.com is not reachable: git's url.*.insteadOf
# in /etc/gitconfig pointing at a local folder of mirrors (mounted into the full build).
SWIFT_PACKAGE_MIRRORS=${SWIFT_PACKAGE_MIRRORS:-/opt/swift-packages}
CONTAINER_PROBLEM=""

log() { echo "$(basename "$0" .sh): $*" >&2; }

# Seconds since the epoch with milliseconds, and the time since a mark, for the timings printed.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  log "installing $*"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 || {
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  }
}

container_setup() {
  local packages=() tool
  for tool in podman runc debootstrap newuidmap slirp4netns fuse-overlayfs; do
    command -v "$tool" >/dev/null 2>&1 && continue
    case $tool in
      podman) packages+=(podman catatonit iptables) ;;
      newuidmap) packages+=(uidmap) ;;
      *) packages+=("$tool") ;;
    esac
  done
  [ -x /usr/lib/podman/netavark ] || command -v netavark >/dev/null 2>&1 || packages+=(netavark aardvark-dns)
  if ((${#packages[@]})); then
    if ! command -v apt-get >/dev/null 2>&1; then
      CONTAINER_PROBLEM="podman is not installed and apt-get is not available to install ${packages[*]}"
      return 1
    fi
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
      CONTAINER_PROBLEM="installing ${packages[*]} needs root or sudo"
      return 1
    fi
    apt_install "${packages[@]}" || { CONTAINER_PROBLEM="apt-get could not install ${packages[*]}"; return 1; }
  fi
  if [ -z "${CONTAINERS_CONF:-}" ]; then
    mkdir -p "$CACHE"
    cat >"$CACHE/containers.conf" <<'EOF'
# Written by scripts/container-env.sh for Debian 12's podman 4.3.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"

[network]
network_backend = "netavark"
EOF
    CONTAINERS_CONF=$(cd "$CACHE" && pwd)/containers.conf
    export CONTAINERS_CONF
  fi
  if ! podman info >/dev/null 2>"$CACHE/podman-info.err"; then
    CONTAINER_PROBLEM="podman cannot run here: $(tail -1 "$CACHE/podman-info.err")"
    return 1
  fi
}

# A minimal Debian 12 root file system, slimmed as Docker's debian:bookworm-slim is (no manuals,
# documentation other than copyright files, or translations; no apt lists), imported as
# $BASE_IMAGE. The tarball stays in $CACHE so that a new podman storage imports it in seconds.
ensure_base_image() {
  podman image exists "$BASE_IMAGE" && return 0
  local tarball=$CACHE/debian-bookworm-slim.tar start
  start=$(now)
  if [ ! -s "$tarball" ]; then
    local root
    root=$(mktemp -d "${TMPDIR:-/tmp}/pushmedia-rootfs.XXXXXX")
    log "debootstrap --variant=minbase bookworm (about a minute)"
    if ! debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1; then
      tail -20 "$CACHE/debootstrap.log" >&2
      rm -rf "$root"
      return 1
    fi
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root/usr/share/man/"* "$root/usr/share/info/"* "$root/usr/share/lintian" "$root/usr/share/linda"
    find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb \
      "$root/var/log/"*.log "$root/var/log/apt/"* "$root/tmp/"*
    tar --numeric-owner -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  podman import -q --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
  log "base image $BASE_IMAGE ready in $(since "$start") s"
}

# A stand-in for Docker Hub's swift:6.3-bookworm (the build stage's image): the base with the
# packages the official image installs, and this machine's Swift toolchain on the PATH. The
# toolchain is copied from a read-only mount (3 GB), not sent as a build context. Its
# /etc/gitconfig has this machine's url.*.insteadOf rules, so that SwiftPM fetches the
# dependencies from $SWIFT_PACKAGE_MIRRORS, which scripts/image.sh mounts into the build.
ensure_swift_image() {
  podman image exists "$SWIFT_IMAGE" && return 0
  ensure_base_image || return 1
  [ -x "$SWIFT_TOOLCHAIN/usr/bin/swift" ] || { log "no Swift toolchain at $SWIFT_TOOLCHAIN"; return 1; }
  local start context
  start=$(now)
  context=$(mktemp -d "${TMPDIR:-/tmp}/pushmedia-swift-image.XXXXXX")
  : >"$context/gitconfig"
  if [ -d "$SWIFT_PACKAGE_MIRRORS" ]; then
    git config --system --get-regexp '^url\..*\.insteadof$' >"$context/insteadof" 2>/dev/null || true
    while read -r key value; do
      git config --file "$context/gitconfig" --add "$key" "$value"
    done <"$context/insteadof"
    rm -f "$context/insteadof"
  fi
  cat >"$context/Containerfile" <<EOF
FROM $BASE_IMAGE
RUN export DEBIAN_FRONTEND=noninteractive && apt-get -q update && apt-get -q install -y \\
      binutils libicu-dev libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev \\
      libpython3-dev libxml2-dev pkg-config uuid-dev tzdata git gcc libstdc++-12-dev \\
    && rm -rf /var/lib/apt/lists/*
RUN mkdir -p /opt/swift && cp -a /mnt/toolchain/. /opt/swift/
COPY gitconfig /etc/gitconfig
ENV PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN swift --version
EOF
  log "building $SWIFT_IMAGE from $SWIFT_TOOLCHAIN (a few minutes)"
  if ! podman build --pull=never --format docker -t "$SWIFT_IMAGE" \
    -v "$SWIFT_TOOLCHAIN:/mnt/toolchain:ro" "$context" >"$CACHE/swift-image.log" 2>&1; then
    tail -30 "$CACHE/swift-image.log" >&2
    rm -rf "$context"
    return 1
  fi
  rm -rf "$context"
  log "swift image $SWIFT_IMAGE ready in $(since "$start") s"
}

# The Containerfile's `media` stage (libvips, FFmpeg, libheif and libcurl compiled: about 20
# minutes on 2 cores) is in podman's cache as long as its lines and the base image are the
# same; scripts/image.sh names it MEDIA_IMAGE (localhost/pushmedia-media:<its key>) once built.
# Call after ensure_base_image.
media_image() {
  local key
  key=$({ sed -n '/^FROM .* AS media$/,/^COPY packaging/p' Containerfile
    podman image inspect --format '{{.Id}}' "$BASE_IMAGE"; } | sha256sum | cut -c1-16)
  echo "localhost/pushmedia-media:$key"
}
