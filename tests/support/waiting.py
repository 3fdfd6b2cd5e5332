"""The one wait of the test suite: poll a condition until it holds, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    cond: Callable[[], object],
    timeout_s: float = 60.0,
    what: str | Callable[[], str] = "condition",
    interval_s: float = 0.05,
) -> Any:
    """Poll `cond` until it is truthy and return its value, or fail after `timeout_s`; `what`
    may be a function, called at the failure, to say what was last seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {said}")
        time.sleep(interval_s)
