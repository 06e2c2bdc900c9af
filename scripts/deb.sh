#!/usr/bin/env bash
# Builds the Debian package pushmedia_<version>_<arch>.deb with dpkg-deb, at the top of the
# repository (DEB_OUT to put it elsewhere), from the release binary that
# scripts/release-static.sh staged in .build-static/stage (run that first; `make deb` does).
# The version is PushMediaVersion.string (Sources/PushMedia/Support/Version.swift).
#   /usr/lib/pushmedia/pushmedia            the binary, with its resource bundle beside it
#   /usr/bin/pushmedia                      a link to it
#   /lib/systemd/system/pushmedia.service   the unit (packaging/deb/pushmedia.service)
#   /etc/default/pushmedia                  its settings, a conffile (packaging/deb/default)
#   /usr/share/doc/pushmedia/               copyright, changelog.Debian.gz
# Depends: what dpkg-shlibdeps finds for the binary (libc6, libcurl4, libglib2.0-0, libmagic1,
# libnghttp2-14, libstdc++6, libvips42, …) plus ffmpeg (run as a child process) and
# ca-certificates. Prints the package's path last.
#   DEB_MAINTAINER="Name <address>" scripts/deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/PushMedia/Support/Version.swift)
[ -n "$VERSION" ] || { echo "deb: no version in Sources/PushMedia/Support/Version.swift" >&2; exit 1; }
ARCH=$(dpkg --print-architecture)
STAGE=${PUSHMEDIA_STATIC_BUILD:-.build-static}/stage
OUT=${DEB_OUT:-.}
MAINTAINER=${DEB_MAINTAINER:-PushMedia maintainers <maintainers@pushmedia.invalid>}
DEB=$OUT/pushmedia_${VERSION}_${ARCH}.deb
BUNDLE=PushMedia_PushMediaServer.resources

[ -x "$STAGE/pushmedia" ] || { echo "deb: $STAGE/pushmedia is missing: run scripts/release-static.sh first" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "deb: $tool is missing (Debian's dpkg-dev)" >&2; exit 1; }
done

start=$(date +%s.%N)
work=.build-static/deb
root=$work/debian/pushmedia
rm -rf "$work"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/pushmedia"

install -m 0755 "$STAGE/pushmedia" "$root/usr/lib/pushmedia/pushmedia"
cp -R "$STAGE/$BUNDLE" "$root/usr/lib/pushmedia/$BUNDLE"
chmod -R u=rwX,go=rX "$root/usr/lib/pushmedia/$BUNDLE"
# The binary finds its bundle beside its real path, so /usr/bin holds a link.
ln -s ../lib/pushmedia/pushmedia "$root/usr/bin/pushmedia"
install -D -m 0644 packaging/deb/pushmedia.service "$root/lib/systemd/system/pushmedia.service"
install -D -m 0640 packaging/deb/default "$root/etc/default/pushmedia"
install -D -m 0644 packaging/deb/copyright "$root/usr/share/doc/pushmedia/copyright"
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'pushmedia (%s) unstable; urgency=medium\n\n  * PushMedia %s.\n\n -- %s  %s\n' \
  "$VERSION" "$VERSION" "$MAINTAINER" "$date" | gzip -9n >"$root/usr/share/doc/pushmedia/changelog.Debian.gz"
chmod 0644 "$root/usr/share/doc/pushmedia/changelog.Debian.gz"

for script in postinst prerm postrm; do
  install -m 0755 "packaging/deb/$script" "$root/DEBIAN/$script"
done
echo /etc/default/pushmedia >"$root/DEBIAN/conffiles"

# The shared libraries' packages, with the versions the binary needs.
printf 'Source: pushmedia\n\nPackage: pushmedia\nArchitecture: %s\n' "$ARCH" >"$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O -e debian/pushmedia/usr/lib/pushmedia/pushmedia 2>shlibdeps.err) \
  || { cat "$work/shlibdeps.err" >&2; exit 1; }
shlibs=${shlibs#shlibs:Depends=}
[ -n "$shlibs" ] || { echo "deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: pushmedia
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $size
Depends: $shlibs, ffmpeg, ca-certificates
Section: net
Priority: optional
Description: media for rich push notifications, as an HTTP service
 PushMedia rewrites push notification payloads so that their media (images, GIFs,
 video, audio) arrive on the phone in a form it shows: fetched, checked, transcoded
 with libvips and FFmpeg, stored and served under a stable URL.
 .
 This package runs pushmedia serve (the HTTP hook, and optionally the APNs and FCM
 relays) as the systemd service pushmedia.service, configured in /etc/default/pushmedia.
EOF
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

mkdir -p "$OUT"
# xz level 3: 9 s here instead of 24 s for level 6, for a package 12 % larger (25 MB, not 22).
dpkg-deb --root-owner-group -Zxz -z3 --build "$root" "$DEB" >/dev/null
echo "deb: $DEB ($(du -m "$DEB" | cut -f1) MB; Depends: $shlibs, ffmpeg, ca-certificates) in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s" >&2
echo "$DEB"
