#!/usr/bin/env bash
# What a GPU machine without network needs for bench/gpu_check.sh, made where PyPI and Debian's
# packages are reachable, as one file:
#
#   bench/gpu_bundle.sh [--python 3.12] [--ort onnxruntime-gpu==1.31.1] [--out FILE] [--split SIZE]
#
# FILE (default gpu-bundle.tar.xz) holds
#   site/  the Python packages the GPU machine's python lacks, installed for --python's version:
#          onnxruntime-gpu (its CUDA major must be the machine's: 1.31.1 is built for CUDA 13 and
#          cuDNN 9, whose libraries gpu_check.sh then finds in that python's nvidia-* packages),
#          nvidia-ml-py, ffmpeg-python, and c2pa-python with cryptography (the C2PA mark of
#          every render);
#   bin/   ffmpeg and ffprobe, linked statically from Debian's ffmpeg source (the version the
#          image uses) with libx264 and NVIDIA's codec headers (NVENC, NVDEC, CUVID; the driver's
#          libraries are loaded at run time), so the renders need only the machine's C library.
# FILE.sha256 is written beside it; --split SIZE also cuts FILE into FILE.part-aa, -ab, ... of
# at most SIZE (split's units) for a transfer that takes limited sizes; gpu_check.sh --bundle
# joins them again and checks the SHA-256.
#
# Needs: pip, apt-get source (a deb-src line), Debian's build dependencies named below, about
# 10-20 minutes on 2 cores for ffmpeg, built in FFMPEG_BUILD (default /tmp/gpu-bundle-ffmpeg),
# which a later run reuses when it holds bin/ffmpeg and bin/ffprobe. The binaries link only the
# C library (glibc ≥ Debian 12's 2.36).
set -euo pipefail
case "${1:-}" in    # the header above is the usage
    -h|--help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac
caller=$PWD                     # relative --out and FFMPEG_BUILD are the caller's
cd "$(dirname "$0")/.."

py_version=3.12
ort="onnxruntime-gpu==1.31.1"
out="gpu-bundle.tar.xz"
split_size=""
while [ $# -gt 0 ]; do
    case "$1" in
        --python) py_version="$2"; shift 2 ;;
        --ort) ort="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --split) split_size="$2"; shift 2 ;;
        *) echo "gpu_bundle.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
out=$(cd "$caller" && realpath -m "$out")
mkdir -p "$(dirname "$out")"
work=$(mktemp -d /tmp/gpu-bundle.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/site" "$work/bin"

echo "== Python packages for CPython $py_version"
python3 -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$work/site" --python-version "$py_version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    "$ort" nvidia-ml-py ffmpeg-python future "c2pa-python==0.38.1" "cryptography>=42" cffi \
    pycparser toml
rm -rf "$work/site/bin"

echo "== ffmpeg, static, from Debian's source"
build=$(cd "$caller" && realpath -m "${FFMPEG_BUILD:-/tmp/gpu-bundle-ffmpeg}")
if [ ! -x "$build/bin/ffmpeg" ] || [ ! -x "$build/bin/ffprobe" ]; then
    rm -rf "$build" && mkdir -p "$build/src"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential libx264-dev \
        libffmpeg-nvenc-dev zlib1g-dev nasm dpkg-dev pkg-config >/dev/null
    (cd "$build/src" && apt-get source -qq --download-only ffmpeg)
    tar -C "$build/src" -xf "$build"/src/ffmpeg_*.orig.tar.xz
    # libx264 and zlib linked in from their static archives (a folder that holds only those is
    # searched first), so the binaries need nothing but the C library
    mkdir -p "$build/static"
    ln -sf "/usr/lib/$(gcc -print-multiarch)/libx264.a" "/usr/lib/$(gcc -print-multiarch)/libz.a" \
        "$build/static/"
    (cd "$build"/src/ffmpeg-*/ &&
     ./configure --prefix="$build" --enable-gpl --enable-static --disable-shared \
         --disable-autodetect --enable-libx264 --enable-zlib --enable-ffnvcodec --enable-nvenc \
         --enable-nvdec --enable-cuvid --disable-doc --disable-ffplay --disable-debug \
         --disable-network --pkg-config-flags=--static \
         --extra-ldflags="-static-libgcc -L$build/static" >"$build/configure.log" &&
     make -j"$(nproc)" >"$build/make.log" && make install >>"$build/make.log")
fi
install -m 755 "$build/bin/ffmpeg" "$build/bin/ffprobe" "$work/bin/"
strip "$work/bin/ffmpeg" "$work/bin/ffprobe"
for exe in ffmpeg ffprobe; do
    deps=$(ldd "$work/bin/$exe" 2>&1 || true)
    if [ -z "$deps" ] || grep -vqE 'linux-vdso|libc\.so|libm\.so|ld-linux' <<<"$deps"; then
        echo "gpu_bundle.sh: $exe needs more than the C library:" >&2; echo "$deps" >&2; exit 1
    fi
done
"$work/bin/ffmpeg" -hide_banner -version | head -1

echo "== $out"
tar -C "$work" -cf - site bin | xz -T0 -6 >"$out.tmp"
mv "$out.tmp" "$out"
(cd "$(dirname "$out")" && sha256sum "$(basename "$out")" >"$(basename "$out").sha256")
if [ -n "$split_size" ]; then
    rm -f "$out".part-*
    split -b "$split_size" "$out" "$out.part-"
fi
ls -l "$out"*
