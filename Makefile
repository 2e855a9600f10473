# Thin wrappers around the commands a person would type. `make help` lists them.
#
#   make image                 GPU image render:gpu         (docker compose build render)
#   make image-cpu             CPU image render:cpu         (docker compose build render-cpu)
#   make render PROFILE=low    render ./in into ./out on the GPU   (docker compose run --rm render ...)
#   make render-cpu PROFILE=low                         ... on the CPU
#   make models                fetch the models of MODEL_SET (default all) for running on this host
#   make classroom             the classroom page + queue worker on the GPU (docker compose up -d)
#   make classroom-cpu                                        ... on the CPU
#   make test                  python -m pytest -q        (the Docker tests skip without an engine)
#   make bench                 python -m bench.run
#   make base-image            local Debian base image without a registry (scripts/build-base-image.sh)
#   make wheels                wheels for an offline image build into requirements/wheels/
#   make locks                 regenerate the hash-locked requirements (pip-tools)

PYTHON   ?= python
PROFILE  ?= moderate
MODEL_SET ?= all
ARGS     ?=
COMPOSE  ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
BASE_IMAGE ?= render-base:bookworm-2

# The container runs as your uid so that ./out stays yours (root is mapped to the image's uid 10001).
HOST_UID := $(shell id -u)
HOST_GID := $(shell id -g)
RENDER_UID ?= $(if $(filter 0,$(HOST_UID)),10001,$(HOST_UID))
RENDER_GID ?= $(if $(filter 0,$(HOST_UID)),10001,$(HOST_GID))
RENDER_VERSION ?= $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' render/__init__.py)
RENDER_MODEL_SET ?= $(MODEL_SET)
RENDER_REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export RENDER_UID RENDER_GID RENDER_VERSION RENDER_MODEL_SET RENDER_REVISION

.PHONY: help image image-cpu render render-cpu models test bench base-image wheels locks folders \
	classroom classroom-cpu

help:
	@sed -n 's/^#   //p' Makefile

image:
	$(COMPOSE) --profile gpu build render

image-cpu:
	$(COMPOSE) --profile cpu build render-cpu

folders:
	@mkdir -p in out
	@mkdir -p jobs
	@if [ "$(HOST_UID)" = 0 ]; then chown $(RENDER_UID):$(RENDER_GID) out jobs; fi

render: folders
	$(COMPOSE) run --rm render profile=$(PROFILE) $(ARGS)

render-cpu: folders
	$(COMPOSE) run --rm render-cpu profile=$(PROFILE) $(ARGS)

classroom: folders
	$(COMPOSE) --profile gpu up -d render-queue render-web

classroom-cpu: folders
	RENDER_WEB_IMAGE=$${RENDER_WEB_IMAGE:-render:cpu} $(COMPOSE) --profile cpu up -d render-queue-cpu render-web

models:
	$(PYTHON) -m render models fetch profile=$(MODEL_SET) $(if $(DIR),dir=$(DIR))

test:
	$(PYTHON) -m pytest -q

bench:
	$(PYTHON) -m bench.run

base-image:
	scripts/build-base-image.sh $(BASE_IMAGE)

# Wheels for both image Pythons (3.10: Ubuntu 22.04 GPU image, 3.11: Debian bookworm CPU image);
# the Dockerfile installs from requirements/wheels/ without an index when it finds wheels there.
wheels:
	for lock in requirements/onnxruntime-gpu.lock requirements/onnxruntime.lock; do \
	  for py in 3.10 3.11; do \
	    $(PYTHON) -m pip download --no-deps --require-hashes --only-binary=:all: --implementation cp \
	      --python-version $$py --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
	      -d requirements/wheels -r $$lock || exit 1; \
	  done; \
	done

PIP_COMPILE = cd requirements && pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-find-links --no-emit-index-url

locks:
	$(PIP_COMPILE) -o onnxruntime.lock onnxruntime.in
	$(PIP_COMPILE) -o onnxruntime-gpu.lock onnxruntime-gpu.in
