#!/usr/bin/env bash
# The prepared GPU check (issue 13): one short run on a lent GPU machine, from a bare checkout.
#
#   bench/gpu_check.sh [--wheels DIR] [--out DIR] [-- extra arguments for bench/gpu_check.py]
#
# 1. installs what it needs into a private folder (/tmp/render-gpu-check-site): onnxruntime-gpu
#    and nvidia-ml-py from PyPI, or from DIR with --wheels when the machine has no network
#    (pip download them where it has), plus numpy, onnx, opencv-python-headless and pyyaml
#    where the machine lacks them;
# 2. runs bench/gpu_check.py under a 280 s limit: providers, ms per call of each realistic-cost
#    stand-in at batch 1/4/8 fp32/fp16, 1080p renders with profiles low/moderate/high (fps, peak
#    GPU memory; low's target ≤ 3.0 GB), NVDEC/NVENC and the fallback taken;
# 3. writes the figures to OUT/gpu_check.json and the log to OUT/gpu_check.log (OUT defaults to
#    $OUT when set, else ./gpu-check-out).
#
# Without a GPU, `bench/gpu_check.sh -- --cpu` is the dry run of every step on the CPU provider.
set -uo pipefail
cd "$(dirname "$0")/.."

wheels=""
out="${OUT:-gpu-check-out}"
while [ $# -gt 0 ]; do
    case "$1" in
        --wheels) wheels="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
mkdir -p "$out"
site=/tmp/render-gpu-check-site
py=${PYTHON:-python3}

have() { "$py" -c "import $1" >/dev/null 2>&1; }
need=()
have numpy || need+=(numpy)
have onnx || need+=(onnx)
have cv2 || need+=(opencv-python-headless)
have yaml || need+=(pyyaml)
gpu_pkgs=(onnxruntime-gpu nvidia-ml-py)
case " $* " in *" --cpu "*) gpu_pkgs=() ;; esac
t0=$(date +%s)
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
timeout 280 "$py" bench/gpu_check.py --json "$out/gpu_check.json" "$@" 2>&1 | tee "$out/gpu_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "gpu_check.py ran past its 280 s limit"
exit "$rc"
