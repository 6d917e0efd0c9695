# syntax=docker/dockerfile:1
#
# Qwen3-TTS Server, two variants from one file:
#   docker build -t qwen3-tts-server .                               # CUDA (the default)
#   docker build --build-arg VARIANT=cpu -t qwen3-tts-server:cpu .   # CPU only, on python:3.11-slim
#
# A builder stage installs the hashed, fully pinned requirements.lock and then the project into /opt/venv; the
# runtime stage gets that venv and nothing else (no pip caches, no sources, no build tools). Python is 3.11 in
# both variants, the version requirements.lock was compiled for.

ARG VARIANT=cuda
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu22.04
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- bases ----------------------------------------------------------------------------------------------------------

FROM ${PYTHON_IMAGE} AS base-cpu

# The torch wheel in requirements.lock is the CUDA build and brings its own CUDA libraries (the nvidia-* wheels);
# the CUDA runtime base adds the NVIDIA container runtime's settings (NVIDIA_VISIBLE_DEVICES,
# NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_CUDA), so that a GPU handed to the container comes with its driver.
FROM ${CUDA_IMAGE} AS base-cuda
# Not version-pinned (DL3008): the distribution's python3.11 takes security fixes under new version strings, and a
# pin would stop the image from building as soon as the archive moved on.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/*

# VARIANT picks one of the two stages above (DL3006 takes base-${VARIANT} for an untagged image).
# hadolint ignore=DL3006
FROM base-${VARIANT} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# --- builder: the venv --------------------------------------------------------------------------------------------

FROM base AS builder
WORKDIR /build
COPY requirements.lock ./
# Every distribution is pinned and hash-checked; the lock holds all the dependencies, hence --no-deps below.
RUN python3.11 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
    && /opt/venv/bin/qwen3-tts-server --help > /dev/null

# --- runtime ------------------------------------------------------------------------------------------------------

FROM base AS runtime
LABEL org.opencontainers.image.title="Qwen3-TTS Server" \
      org.opencontainers.image.description="OpenAI-compatible speech server for the Qwen3-TTS 12 Hz models" \
      org.opencontainers.image.licenses="Apache-2.0"
# jemalloc, preloaded below, at a path that is the same on every architecture (the package puts it under the
# multiarch directory, x86_64-linux-gnu or aarch64-linux-gnu). Not version-pinned (DL3008), as above.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libjemalloc2 \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(find /usr/lib -name libjemalloc.so.2 -print -quit)" /usr/local/lib/libjemalloc.so
RUN groupadd --system --gid 10001 qwen3tts \
    && useradd --system --uid 10001 --gid qwen3tts --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin qwen3tts \
    && mkdir -p /data/huggingface /data/library \
    && chown -R qwen3tts:qwen3tts /data
COPY --from=builder /opt/venv /opt/venv

# HF_HOME: the model cache (hub downloads); DATA_DIR: the voice library (DATA_DIR/voices/<id>/).
ENV PATH=/opt/venv/bin:$PATH \
    HOST=0.0.0.0 \
    PORT=8000 \
    HF_HOME=/data/huggingface \
    DATA_DIR=/data/library
# The earlier server's tuning. jemalloc instead of glibc's malloc, its background thread handing freed pages back
# within a second: about 10% less resident memory on a CPU (benchmarks/allocator_rss.py). CUDA's caching allocator
# grows its segments instead of cutting new ones, which fragments GPU memory less. No OMP_NUM_THREADS: torch's
# threads follow the engine's cores (INFERENCE_CPU_CORES, else the cores the container may use).
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so \
    MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0 \
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
VOLUME ["/data/huggingface", "/data/library"]

# `serve` reads ./.env too: mount one at /app/.env, or pass the settings as environment variables.
WORKDIR /app
USER 10001:10001
EXPOSE 8000

# GET /ready over HOST:PORT (or UNIX_SOCKET_PATH); the start period covers a first model download and load.
HEALTHCHECK --interval=30s --timeout=10s --start-period=600s --retries=3 CMD ["qwen3-tts-server", "healthcheck"]

# `serve` runs the server, or with GATEWAY_MODE=true the light gateway that starts the server on demand.
ENTRYPOINT ["qwen3-tts-server"]
CMD ["serve"]
