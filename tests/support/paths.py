"""Where the repository is, for tests that read its files or run its commands from its root."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
