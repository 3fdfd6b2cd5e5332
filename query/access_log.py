"""The query service's access log (`FLEETSCOPE_ACCESS_LOG=text|json`), one line per request on
stdout, written by gunicorn's arbiter-side logger class.

Only what an operator needs to follow traffic: client address, method, path, query string,
status, bytes, duration, the request's own CPU time (JSON), user agent. Never request headers
(Authorization carries bearer tokens; in `header` mode X-Remote-User is only trusted from the
proxy) and never cookies.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from gunicorn.glogging import Logger

# gunicorn's `text` format without %(u)s (a user name gunicorn decodes from Basic auth) and
# without %(f)s (referers may carry foreign query strings): host, request line, status, bytes,
# milliseconds, user agent.
TEXT_FORMAT = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'
CPU_KEY = "fleetscope.cpu_s"
"""Where the app leaves a request's own CPU seconds (its thread's) in the WSGI environ."""


def access_record(
    status: str, sent: int | None, environ: dict[str, Any], duration: datetime.timedelta
) -> dict[str, Any]:
    """The JSON access record of one request (`cpuMs`: the CPU its thread spent in the app,
    when the app measured it)."""
    record = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        "level": "INFO",
        "logger": "access",
        "remote": environ.get("REMOTE_ADDR", ""),
        "method": environ.get("REQUEST_METHOD", ""),
        "path": environ.get("PATH_INFO", ""),
        "query": environ.get("QUERY_STRING", ""),
        "status": int(str(status).split(None, 1)[0]),
        "bytes": sent or 0,
        "durationMs": round(duration.total_seconds() * 1000, 3),
        "userAgent": environ.get("HTTP_USER_AGENT", ""),
    }
    cpu = environ.get(CPU_KEY)
    if isinstance(cpu, float):
        record["cpuMs"] = round(cpu * 1000, 3)
    return record


class JsonAccessLogger(Logger):  # type: ignore[misc]
    """gunicorn's logger with access lines as JSON objects (error log unchanged)."""

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        if not self.cfg.accesslog:
            return
        record = access_record(resp.status, getattr(resp, "sent", None), environ, request_time)
        self.access_log.info("%s", json.dumps(record, separators=(",", ":")))
