#!/usr/bin/env bash
# The prepared GPU check (issue 13): one short run on a lent GPU machine, from a bare checkout.
#
#   bench/gpu_check.sh [--wheels DIR | --bundle FILE] [--out DIR] [-- arguments for gpu_check.py]
#
# 1. installs what it needs into a private folder (/tmp/render-gpu-check-site): onnxruntime-gpu
#    and nvidia-ml-py from PyPI, or from DIR with --wheels when the machine has no network
#    (pip download them where it has), plus numpy, onnx, opencv-python-headless and pyyaml
#    where the machine lacks them; or, with --bundle, unpacks FILE made by bench/gpu_bundle.sh
#    (those packages installed for the machine's python, and a static ffmpeg/ffprobe with NVENC
#    and NVDEC, which then come first on PATH; FILE.part-* are joined when FILE is absent, and
#    FILE.sha256 is checked where it exists). The CUDA and cuDNN libraries that onnxruntime-gpu
#    loads are looked for in the python's nvidia-* packages (as PyTorch installs them) and put
#    on LD_LIBRARY_PATH;
# 2. runs python -m bench.gpu_check (bench/gpu_check.py) under a 480 s limit: providers, ms per
#    call of each realistic-cost stand-in at batch 1/4/8 fp32/fp16, 1080p renders with profiles
#    low/moderate/high (fps, peak GPU memory; low's target ≤ 3.0 GB), NVDEC/NVENC and the
#    fallback taken; profiles low and moderate at 1080p with 1, 2, 4 and auto segments at once
#    (fps, peak GPU memory, CPU use) and two renders on one GPU (issue 32);
# 3. writes the figures to OUT/gpu_check.json and the log to OUT/gpu_check.log (OUT defaults to
#    $OUT when set, else ./gpu-check-out).
#
# Without a GPU, `bench/gpu_check.sh -- --cpu` is the dry run of every step on the CPU provider.
set -uo pipefail
case "${1:-}" in    # the header above is the usage
    -h|--help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac
caller=$PWD                     # relative --wheels, --bundle and --out are the caller's
cd "$(dirname "$0")/.."

wheels=""
bundle=""
out="${OUT:-gpu-check-out}"
while [ $# -gt 0 ]; do
    case "$1" in
        --wheels) wheels="$2"; shift 2 ;;
        --bundle) bundle="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
resolve() { [ -z "$1" ] || (cd "$caller" && realpath -m "$1"); }
out=$(resolve "$out"); wheels=$(resolve "$wheels"); bundle=$(resolve "$bundle")
mkdir -p "$out"
site=/tmp/render-gpu-check-site
py=${PYTHON:-python3}

t0=$(date +%s)
if [ -n "$bundle" ]; then
    if [ ! -f "$bundle" ]; then
        parts=("$bundle".part-*)
        [ -f "${parts[0]}" ] || { echo "gpu_check.sh: no $bundle and no $bundle.part-*" >&2; exit 2; }
        echo "joining ${#parts[@]} parts of $bundle"
        cat "${parts[@]}" >"/tmp/$(basename "$bundle")" && bundle="/tmp/$(basename "$bundle")"
        [ -f "${parts[0]%.part-*}.sha256" ] && cp "${parts[0]%.part-*}.sha256" "$bundle.sha256"
    fi
    if [ -f "$bundle.sha256" ]; then
        (cd "$(dirname "$bundle")" && sha256sum -c --quiet "$(basename "$bundle").sha256") \
            || { echo "gpu_check.sh: $bundle does not match its SHA-256" >&2; exit 2; }
    else
        echo "WARNING: no $bundle.sha256 beside the bundle: its SHA-256 is NOT checked"
    fi
    unpacked=/tmp/render-gpu-check-bundle
    rm -rf "$unpacked" && mkdir -p "$unpacked"
    tar -C "$unpacked" -xJf "$bundle" || { echo "gpu_check.sh: cannot unpack $bundle" >&2; exit 2; }
    export PYTHONPATH="$unpacked/site${PYTHONPATH:+:$PYTHONPATH}"
    [ -x "$unpacked/bin/ffmpeg" ] && export PATH="$unpacked/bin:$PATH"
    echo "bundle unpacked: $(ls "$unpacked/site" | grep -c dist-info) packages; ffmpeg $(command -v ffmpeg)"
fi
# onnxruntime-gpu's CUDA provider names libcudart, libcublas, libcufft, libcurand and libcudnn
# without a path: where the python has them as nvidia-* packages (PyTorch's), put their folders
# on the library path of this script's processes.
nvlibs=$("$py" - <<'PY' 2>/dev/null
import glob, os, sys
dirs = []
for p in sys.path:
    for so in glob.glob(os.path.join(p or ".", "nvidia", "**", "lib*.so*"), recursive=True):
        d = os.path.dirname(os.path.abspath(so))
        if d not in dirs:
            dirs.append(d)
print(":".join(dirs))
PY
)
if [ -n "$nvlibs" ]; then
    export LD_LIBRARY_PATH="$nvlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "CUDA libraries from the python's nvidia packages: $(echo "$nvlibs" | tr ':' '\n' | wc -l) folders"
fi

have() { "$py" -c "import $1" >/dev/null 2>&1; }
need=()
have numpy || need+=(numpy)
have onnx || need+=(onnx)
have cv2 || need+=(opencv-python-headless)
have yaml || need+=(pyyaml)
gpu_pkgs=(onnxruntime-gpu nvidia-ml-py)
case " $* " in *" --cpu "*) gpu_pkgs=() ;; esac
if [ -n "$bundle" ]; then       # offline: report what is missing instead of asking PyPI
    gpu_pkgs=()
    [ ${#need[@]} -gt 0 ] && echo "WARNING: missing here and not in the bundle: ${need[*]}"
    need=()
fi
if [ ${#gpu_pkgs[@]} -gt 0 ] || [ ${#need[@]} -gt 0 ]; then
    if [ -n "$wheels" ]; then
        src=(--no-index --find-links "$wheels")
    else
        src=()
    fi
    echo "installing into $site: ${gpu_pkgs[*]} ${need[*]}"
    if ! "$py" -m pip install -q --disable-pip-version-check --target "$site" --upgrade \
            "${src[@]}" "${gpu_pkgs[@]}" "${need[@]}" 2>&1 | tail -3; then
        echo "pip install failed: continuing with what is installed"
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "install took $(( $(date +%s) - t0 ))s"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
timeout 480 "$py" -m bench.gpu_check --json "$out/gpu_check.json" "$@" 2>&1 | tee "$out/gpu_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "gpu_check.py ran past its 480 s limit"
exit "$rc"
