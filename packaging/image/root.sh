#!/bin/sh
# The container image's whole root file system, assembled in the Containerfile's `media` stage
# (Debian, with libvips and FFmpeg built there) into $1 (default /rootfs), for a `FROM scratch`
# image: the programs PushMedia runs and, found with ldd, exactly the shared libraries they load,
# each under the path the dynamic loader looks in; the data files those libraries read; the
# users; no shell, no package manager, no other program.
#   /staging/usr/lib/pushmedia/       pushmedia and its resource bundle (given by the Containerfile)
#   /usr/local/bin/ffmpeg, ffprobe    built in the media stage (FFmpeg's libraries linked in)
#   /usr/bin/prlimit                  caps each FFmpeg child's memory (util-linux)
# Every shared library must be named in packaging/image/libraries.txt (with what it serves):
# a library that is not is an error here, so nothing enters the image unexplained.
set -eu
root=${1:-/rootfs}
here=$(dirname "$0")
programs="/staging/usr/lib/pushmedia/pushmedia /usr/local/bin/ffmpeg /usr/local/bin/ffprobe /usr/bin/prlimit"

rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/usr/lib/x86_64-linux-gnu" "$root/usr/lib64" "$root/etc/ssl/certs" \
    "$root/usr/lib/file" "$root/usr/share/misc" "$root/var/lib/pushmedia/store" "$root/tmp"
# Debian's merged /usr: the loader's and the libraries' paths as ldd prints them.
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
chmod 1777 "$root/tmp"

cp -a /staging/. "$root/"
ln -s ../lib/pushmedia/pushmedia "$root/usr/bin/pushmedia"
cp /usr/local/bin/ffmpeg /usr/local/bin/ffprobe /usr/bin/prlimit "$root/usr/bin/"
# The binary's symbols stay out (31.8 MB of 130.5): its build ID names the unstripped binary that
# symbolicates a crash's addresses (.build-static/stage/pushmedia, or the build stage's).
strip --strip-unneeded "$root/usr/lib/pushmedia/pushmedia" "$root/usr/bin/ffmpeg" "$root/usr/bin/ffprobe"

# The libraries: each resolved path copied as a file (the soname's link followed), stripped of
# what the loader does not need.
unknown=""
# ROOT_MODULES: shared objects loaded by name at run time (Debian's libvips modules, for the
# stand-in), copied with the libraries they load.
for library in $({ for program in $programs ${ROOT_MODULES:-}; do ldd "$program"; done
    for module in ${ROOT_MODULES:-}; do echo "$module"; done; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u); do
    name=$(basename "$library")
    if ! grep -q "^$name[[:space:]]" "$here/libraries.txt"; then unknown="$unknown $name"; fi
    mkdir -p "$root$(dirname "$library")"
    cp -L "$library" "$root$library"
    case $name in ld-linux*) ;; *) strip --strip-unneeded "$root$library" ;; esac
done
# ROOT_LIBRARIES=any: the stand-in around Debian's own libraries (Containerfile, media-debian),
# which load many that are not listed; never the image that ships.
if [ -n "$unknown" ] && [ "${ROOT_LIBRARIES:-listed}" != any ]; then
    echo "root.sh: libraries not named in packaging/image/libraries.txt:$unknown" >&2
    exit 1
fi

# Data the libraries read: libmagic's database, the CA certificates libcurl trusts.
cp -L /usr/lib/file/magic.mgc "$root/usr/lib/file/magic.mgc"
ln -s ../../lib/file/magic.mgc "$root/usr/share/misc/magic.mgc"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The users (uid 10001 for runAsNonRoot and the volume's owner) and name resolution.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\npushmedia:x:10001:10001:PushMedia:/var/lib/pushmedia:/usr/sbin/nologin\n' \
    >"$root/etc/passwd"
printf 'root:x:0:\npushmedia:x:10001:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chown -R 10001:10001 "$root/var/lib/pushmedia"

# Nothing runs that was not checked: the programs start on the new root's loader and libraries
# alone. Not in a chroot: one without /proc makes the Swift runtime trap at start now and then
# (SIGILL, a few runs in a hundred), which the container, with its /proc, never does.
started() {
    "$root/lib64/ld-linux-x86-64.so.2" --inhibit-cache --library-path "$root/usr/lib/x86_64-linux-gnu" "$@" >/dev/null
}
started "$root/usr/lib/pushmedia/pushmedia" --version
started "$root/usr/bin/ffmpeg" -hide_banner -version
started "$root/usr/bin/ffprobe" -hide_banner -version
started "$root/usr/bin/prlimit" --version
echo "root.sh: $(du -sm "$root" | cut -f1) MB in $root"
