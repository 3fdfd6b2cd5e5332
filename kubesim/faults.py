"""Per-cluster fault injection and the request log, both switchable while serving.

`Fault` is what `KubeSim.set_fault` sets: added latency, a share of requests answered 500 or
429 (with Retry-After), down (socket closed: connection refused), continue tokens that always
expire (410), and stalled watches (open, but silent). `RequestRecord` is one logged request.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kubesim.errors import KubeError


@dataclass(frozen=True)
class Fault:
    latency_s: float = 0.0
    error_rate: float = 0.0
    status: int = 500  # 500 or 429
    retry_after_s: int = 1
    down: bool = False
    expire_continue: bool = False
    stall_watch: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError("error_rate must be between 0 and 1")
        if self.status not in (429, 500, 503):
            raise ValueError("status must be 429, 500 or 503")

    def injected_error(self, rng: random.Random) -> KubeError | None:
        """The error to answer instead of serving, drawn with probability `error_rate`."""
        if self.error_rate <= 0 or rng.random() >= self.error_rate:
            return None
        if self.status == 429:
            err = KubeError(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
                {"retryAfterSeconds": self.retry_after_s},
            )
            err.headers["Retry-After"] = str(self.retry_after_s)
            return err
        reason = "ServiceUnavailable" if self.status == 503 else "InternalError"
        return KubeError(self.status, reason, "kubesim: injected server error")


@dataclass(frozen=True)
class RequestRecord:
    """One request as the cluster saw it; `user` is the authenticated (not impersonated) one."""

    method: str
    path: str
    query: dict[str, str]
    user: str
    impersonate_user: str
    impersonate_groups: tuple[str, ...]
    status: int
    verb: str = ""
    resource: str = ""
    namespace: str = ""
    items: int = 0  # objects returned by a list page
    extra: dict[str, str] = field(default_factory=dict)
