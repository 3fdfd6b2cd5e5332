"""fleetscope's exception tree. Retry policy is part of the type; HTTP codes are too.

    FleetscopeError
    +-- ConfigError                 bad setting or config file; fail fast at start-up
    +-- TemporaryError(delay_s)     worth retrying after `delay_s` (tasks: autoretry_for)
    |   +-- ClusterUnreachable      leaf API down, timed out, 5xx or 429
    |   +-- RedisUnavailable        Redis down or not answering              (HTTP 503)
    |   +-- LockBusy                another worker is syncing this cluster
    +-- PermanentError              retrying will not help
    |   +-- ClusterError            leaf refused us (401/403), bad kubeconfig, bad data
    +-- RequestError                the caller's fault or a refusal, mapped to HTTP
        +-- InvalidInput(param)     400: a parameter is malformed or out of range
        +-- ForeignHost             400: a `Host` the service does not answer to
        +-- Unauthenticated         401: missing or bad credentials
        +-- Forbidden               403: authenticated but not allowed
        +-- NotFound                404
        +-- TooBusy                 429: the service serves as much of this as it may
        +-- Unavailable             503: a part of the service is not running; retry
        +-- UpstreamTimeout         504: a leaf cluster did not answer in time
        +-- UpstreamError           502: a leaf cluster answered with an error

Third-party exceptions are translated at one boundary each and chained with `from e`.
Messages never contain credentials.
"""

from __future__ import annotations


class FleetscopeError(Exception):
    """Base of every error fleetscope raises on purpose."""


class ConfigError(FleetscopeError):
    """A setting or configuration file is invalid; the message names it and what it accepts."""


class TemporaryError(FleetscopeError):
    """A failure that may pass: retry after `delay_s` seconds."""

    def __init__(self, message: str, delay_s: float = 5.0) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class ClusterUnreachable(TemporaryError):
    """A leaf cluster's API server is down, slow, overloaded (429) or failing (5xx)."""


class RedisUnavailable(TemporaryError):
    """Redis is down or not answering."""


class LockBusy(TemporaryError):
    """Another worker holds this cluster's sync lock."""


class PermanentError(FleetscopeError):
    """A failure that retrying will not fix."""


class ClusterError(PermanentError):
    """A leaf cluster refused us, its kubeconfig is unusable, or it sent data we cannot use."""


class RequestError(FleetscopeError):
    """An error answered to an HTTP caller; `status` and `code` say how."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(RequestError):
    """A request parameter is malformed or out of range; `param` names it."""

    status = 400
    code = "invalid_parameter"

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class ForeignHost(RequestError):
    """The request's `Host` is not one of FLEETSCOPE_ALLOWED_HOSTS (DNS rebinding)."""

    status = 400
    code = "invalid_host"


class Unauthenticated(RequestError):
    status = 401
    code = "unauthenticated"


class Forbidden(RequestError):
    status = 403
    code = "forbidden"


class NotFound(RequestError):
    status = 404
    code = "not_found"


class TooBusy(RequestError):
    status = 429
    code = "too_busy"


class Unavailable(RequestError):
    """A part of the service this request needs is not running (e.g. the stream process)."""

    status = 503
    code = "unavailable"


class UpstreamError(RequestError):
    status = 502
    code = "upstream_error"


class UpstreamTimeout(RequestError):
    status = 504
    code = "upstream_timeout"
