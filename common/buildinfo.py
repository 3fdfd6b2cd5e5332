"""What is running: fleetscope's version from the installed package's metadata (one source:
pyproject.toml), shown by `fleetscope --version` and exported by every component that serves
/metrics as `fleetscope_build_info{version, python, row_builder} 1`."""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Iterator
from typing import Any

DISTRIBUTION = "fleetscope"


def version() -> str:
    """The installed version, or `unknown` when running from a tree that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def row_builder() -> str:
    """`compiled` when the row builder's modules run as C extensions here (common.native),
    `python` when they run from their sources (not built, stale, or `FLEETSCOPE_PURE`)."""
    import importlib

    from common import native

    loaded = [importlib.import_module(m) for m in native.MODULES]
    return "compiled" if all(native.compiled(m) for m in loaded) else "python"


class BuildInfoCollector:
    """A prometheus-client collector for `fleetscope_build_info` (always 1; the labels say what
    runs). Computed at scrape time, so it is one series per process serving /metrics even in
    multiprocess mode."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        info = GaugeMetricFamily(
            "fleetscope_build_info",
            "Always 1; labels: the fleetscope version, the Python version running it, and whether"
            " the row builder runs compiled (compiled, python).",
            labels=["version", "python", "row_builder"],
        )
        info.add_metric([version(), platform.python_version(), row_builder()], 1.0)
        yield info
