# render: face-swap video renderer appliance.
#
#   GPU image (default):  docker build -t render:gpu .
#   CPU image:            docker build -t render:cpu --build-arg ORT_PACKAGE=onnxruntime \
#                                      --build-arg BASE_IMAGE=debian:bookworm-slim .
#   (or: make image / make image-cpu, or docker compose build)
#
# Build arguments
#   BASE_IMAGE      CUDA 12 + cuDNN 9 runtime on Ubuntu 22.04 by default. 12.3 is the lowest CUDA 12
#                   minor with a cuDNN 9 image (12.0-12.2 ship cuDNN 8, which onnxruntime-gpu 1.23 cannot
#                   load); onnxruntime-gpu 1.23.2 itself is built with CUDA 12.2. Host driver >= 545.23.06.
#                   Any Debian/Ubuntu image works for the CPU variant (ffmpeg, python3, python3-venv are
#                   installed with apt-get when missing).
#   ORT_PACKAGE     onnxruntime-gpu (default) or onnxruntime (CPU image): picks requirements/<it>.lock.
#   MODEL_SET       profiles whose models are baked in: a profile name, several (low,high), or all.
#   WITH_TENSORRT   1 adds TensorRT 10 (libnvinfer, from the CUDA image's NVIDIA apt repository), so
#                   the TensorRT execution provider can load; GPU image only. TENSORRT_VERSION pins it.
#   VERSION, SOURCE_URL, REVISION   OCI labels.
#
# Offline / air-gapped inputs taken from the build context when present:
#   requirements/wheels/*.whl   Python wheels (pip download ... -r requirements/<lock>); installed
#                               with --no-index, still checked against the lock's hashes.
#   models/local/               model files (and a manifest.yaml overlay for your own models):
#                               copied instead of downloaded, verified by SHA-256 the same way.
#
# Layer order: OS packages -> Python dependencies -> models -> application code. The models are
# fetched in their own stage that sees only models/, profiles/ and the code of `render models fetch`
# (render/models/; render/processors/, masks/ and landmarks/ for the contracts and the models a
# profile needs; cli.py, config/, errors.py), so editing the renderer (faces/, media/, pipeline,
# renderer, sessions) never re-downloads them.
# Only classic-builder features are used: the docker SDK and docker-compose v1 build without BuildKit.

ARG BASE_IMAGE=nvidia/cuda:12.3.2-cudnn-runtime-ubuntu22.04

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS os

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# ffmpeg, mkvtoolnix (re-timing variable-frame-rate video) and Python from the distribution. apt-get runs only for what is missing, so a base that
# already carries them (the test suite's debootstrapped one) builds without a package mirror.
RUN set -eu; \
    missing=""; \
    for pkg in ffmpeg mkvtoolnix python3 python3-venv ca-certificates; do \
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed' \
            || missing="$missing $pkg"; \
    done; \
    if [ -n "$missing" ]; then \
        echo "installing:$missing"; \
        apt-get update; \
        apt-get install -y --no-install-recommends $missing; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    ffmpeg -hide_banner -version | head -n 1; \
    python3 --version

# Optional TensorRT layer (GPU image). The nvidia/cuda images come with NVIDIA's apt repository.
ARG WITH_TENSORRT=0
ARG TENSORRT_VERSION=10.13.3.9-1+cuda12.9
RUN set -eu; \
    if [ "$WITH_TENSORRT" = 1 ]; then \
        apt-get update; \
        apt-get install -y --no-install-recommends \
            "libnvinfer10=$TENSORRT_VERSION" "libnvinfer-plugin10=$TENSORRT_VERSION" \
            "libnvonnxparsers10=$TENSORRT_VERSION"; \
        rm -rf /var/lib/apt/lists/*; \
    elif [ "$WITH_TENSORRT" != 0 ]; then \
        echo "WITH_TENSORRT must be 0 or 1, not '$WITH_TENSORRT'" >&2; exit 2; \
    fi

# ---------------------------------------------------------------------------------------------
# Python dependencies: a venv (Debian's Python is "externally managed", PEP 668), installed from a
# hash-locked requirements file with --require-hashes --no-deps: nothing unpinned gets in.
FROM os AS deps
ARG BASE_IMAGE
LABEL io.render.stage=deps io.render.base="$BASE_IMAGE"

COPY requirements/ /opt/render/requirements/
ARG ORT_PACKAGE=onnxruntime-gpu
RUN set -eu; \
    lock="/opt/render/requirements/$ORT_PACKAGE.lock"; \
    if [ ! -f "$lock" ]; then \
        echo "ORT_PACKAGE=$ORT_PACKAGE: no $lock (use onnxruntime-gpu or onnxruntime)" >&2; exit 2; \
    fi; \
    python3 -m venv /opt/render/venv; \
    source=""; \
    if ls /opt/render/requirements/wheels/*.whl >/dev/null 2>&1; then \
        echo "installing from the wheels in requirements/wheels/ (no index)"; \
        source="--no-index --find-links /opt/render/requirements/wheels"; \
    fi; \
    /opt/render/venv/bin/pip install --require-hashes --no-deps --only-binary=:all: $source -r "$lock"; \
    /opt/render/venv/bin/pip check; \
    /opt/render/venv/bin/python -c "import onnxruntime as ort, cv2, numpy; print('onnxruntime', ort.__version__, ort.get_available_providers(), 'opencv', cv2.__version__, 'numpy', numpy.__version__)"; \
    find /opt/render/venv -name '__pycache__' -prune -exec rm -rf {} +

# ---------------------------------------------------------------------------------------------
# Models: fetched (or copied from models/local/) and verified against the manifest. This stage
# copies only what `render models fetch` needs, so that code changes elsewhere keep its cache.
FROM os AS models
ARG BASE_IMAGE
LABEL io.render.stage=models io.render.base="$BASE_IMAGE"

COPY --from=deps /opt/render/venv /opt/render/venv
COPY render/__init__.py render/__main__.py render/cli.py render/errors.py render/files.py render/interrupts.py \
    render/options.py render/model_handle.py /opt/render/app/render/
COPY render/faces/__init__.py render/faces/align.py render/faces/contracts.py /opt/render/app/render/faces/
COPY render/config/ /opt/render/app/render/config/
COPY render/models/ /opt/render/app/render/models/
COPY render/processors/ /opt/render/app/render/processors/
COPY render/masks/ /opt/render/app/render/masks/
COPY render/landmarks/ /opt/render/app/render/landmarks/
COPY profiles/ /opt/render/app/profiles/
COPY models/ /opt/render/app/models/
ARG MODEL_SET=all
RUN set -eu; \
    from=""; \
    if [ -d /opt/render/app/models/local ] && [ -n "$(ls -A /opt/render/app/models/local | grep -v '^README')" ]; then \
        from="from=/opt/render/app/models/local"; \
    fi; \
    cd /opt/render/app; \
    RENDER_CACHE_DIR=/tmp/render-cache /opt/render/venv/bin/python -m render models fetch \
        "profile=$MODEL_SET" dir=/opt/render/models $from; \
    RENDER_CACHE_DIR=/tmp/render-cache /opt/render/venv/bin/python -m render models list \
        dir=/opt/render/models | tee /opt/render/models/MODELS.txt; \
    rm -rf /tmp/render-cache; \
    find /opt/render/app -name '__pycache__' -prune -exec rm -rf {} +

# ---------------------------------------------------------------------------------------------
FROM os AS final

ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_URL=https://example.invalid/render
ARG ORT_PACKAGE=onnxruntime-gpu
ARG MODEL_SET=all
ARG MODEL_LICENCES="inswapper_128, arcface_w600k_r50, scrfd_2.5g, retinaface_10g: InsightFace, non-commercial use only; gfpgan_1.4: Apache-2.0; yunet: MIT; yoloface_8n: GPL-3.0 (see /opt/render/models/MODELS.txt)"
LABEL org.opencontainers.image.title="render" \
      org.opencontainers.image.description="Reproducible, streaming face-swap video renderer (ONNX Runtime + ffmpeg)" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="$SOURCE_URL" \
      io.render.onnxruntime="$ORT_PACKAGE" \
      io.render.model-set="$MODEL_SET" \
      io.render.model-licences="$MODEL_LICENCES"

# The non-root user the appliance runs as; /cache and /locks (named volumes in compose.yaml; /locks
# is shared by every render on the host) are created here
# owned by it so Docker seeds a new volume with that owner. Mode 1777 lets an override uid
# (compose's RENDER_UID) use it too.
RUN set -eu; \
    groupadd --gid 10001 render; \
    useradd --no-log-init --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin render; \
    mkdir -p /cache /locks /data/in /data/out /data/jobs; \
    chown render:render /cache /data/out /data/jobs; \
    chmod 1777 /cache /locks

COPY --from=deps /opt/render/venv /opt/render/venv
COPY --from=models /opt/render/models /opt/render/models

# Application code last. A source install (a .pth entry, not a wheel): the renderer reads
# profiles/*.yaml and models/manifest.yaml next to its package.
COPY pyproject.toml /opt/render/app/
COPY profiles/ /opt/render/app/profiles/
COPY models/manifest.yaml /opt/render/app/models/manifest.yaml
COPY render/ /opt/render/app/render/
RUN set -eu; \
    find /opt/render/app -name '__pycache__' -prune -exec rm -rf {} +; \
    site="$(/opt/render/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    echo /opt/render/app > "$site/render-app.pth"; \
    printf '#!/bin/sh\nexec /opt/render/venv/bin/python -m render "$@"\n' > /opt/render/venv/bin/render; \
    chmod 755 /opt/render/venv/bin/render; \
    /opt/render/venv/bin/python -c "import render, render.batch, render.shards, render.web; print('render', render.__version__)"

ENV PATH=/opt/render/venv/bin:$PATH \
    HOME=/tmp \
    RENDER_MODELS_DIR=/opt/render/models \
    RENDER_CACHE_DIR=/cache \
    RENDER_INPUT_DIR=/data/in \
    RENDER_OUTPUT_DIR=/data/out \
    ORT_DISABLE_TELEMETRY=1 \
    CUDA_DEVICE_ORDER=PCI_BUS_ID
# The image's build identity, recorded in every render's report.
ARG BASE_IMAGE
ENV RENDER_IMAGE_VERSION="$VERSION" \
    RENDER_IMAGE_REVISION="$REVISION" \
    RENDER_IMAGE_BASE="$BASE_IMAGE" \
    RENDER_IMAGE_ORT_PACKAGE="$ORT_PACKAGE"

# Started as root by compose.yaml, the entrypoint becomes the owner of /data/out (./out) and runs
# render as them; started as any other user (the default below, docker run --user) it runs as it.
COPY deploy/entrypoint.sh /opt/render/entrypoint
USER 10001:10001
WORKDIR /data
# Arguments are key=value settings (docker compose run render profile=low ...). With no target= the
# CLI renders every video and image in /data/in with /data/in/source.(jpg|png) into /data/out.
ENTRYPOINT ["/opt/render/entrypoint"]
