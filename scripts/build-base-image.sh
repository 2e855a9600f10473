#!/usr/bin/env bash
# Build a minimal Debian base image without any container registry:
# debootstrap a root filesystem into a temporary folder, then `docker import` it.
#
#   scripts/build-base-image.sh [NAME:TAG]      (default render-base:bookworm-2)
#
# The image carries python3, python3-venv, ffmpeg, mkvtoolnix and ca-certificates, so the real
# Dockerfile can be built on it with BASE_IMAGE=NAME:TAG. It is cached by tag: when the
# tag exists already nothing is done (FORCE=1 rebuilds; the tag's -N suffix is bumped whenever the
# package set changes). Needs root (debootstrap chroots).
# Environment: SUITE (bookworm), MIRROR (http://deb.debian.org/debian), FORCE.
set -euo pipefail
case "${1:-}" in    # the header above is the usage
    -h|--help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac

NAME="${1:-render-base:bookworm-2}"
SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-venv,ffmpeg,mkvtoolnix,ca-certificates"

if [ -z "${FORCE:-}" ] && docker image inspect "$NAME" >/dev/null 2>&1; then
    echo "build-base-image: $NAME exists; nothing to do (FORCE=1 rebuilds)"
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "build-base-image: debootstrap is not installed (apt-get install debootstrap)" >&2
    exit 2
fi
if [ "$(id -u)" != 0 ]; then
    echo "build-base-image: debootstrap needs root" >&2
    exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/render-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

start=$(date +%s)
echo "build-base-image: debootstrap $SUITE ($PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 40 "$work/debootstrap.log" >&2; exit 1; }

# Same sources a stock Debian image has (updates and security), so apt-get works in builds.
cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SOURCES
# Slim it the way stock images are slimmed: no downloaded .debs, no package lists, no docs.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
# No hostname/resolv.conf baked in: the engine provides them.
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"

# Import untagged first and tag only when both ends of the pipe succeeded, so that a failed
# run never leaves a half-imported image under NAME (the cache check above trusts the tag).
id=$(tar --numeric-owner -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' \
    -m "debootstrap --variant=minbase --include=$PACKAGES $SUITE" \
    -) || { echo "build-base-image: tar | docker import failed" >&2; exit 1; }
docker tag "$id" "$NAME"

size=$(docker image inspect -f '{{.Size}}' "$NAME")
echo "build-base-image: $NAME built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB"
