"""Delivery to Alertmanager's v2 API (`POST /api/v2/alerts`), to every configured URL (an HA
pair is sent everything, as Prometheus does).

Firing alerts are re-sent at each evaluation with `endsAt` four evaluation intervals ahead
(Prometheus: `ValidUntil = now + 4 * max(resend delay, interval)`; fleetscope resends every
interval), so Alertmanager keeps them while fleetscope is alive, and drops them by itself if it
stops. Resolved alerts are sent with `endsAt` = when they resolved, and kept until every URL
took them (or `RESOLVED_KEEP_S`). Requests have bounded timeouts; credentials are read from
their files at each delivery and never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import redis
import requests

from common import redis_client
from common.alerts import state
from common.alerts.evaluate import epoch
from common.alerts.state import Alert
from common.index import keys
from common.settings import Settings

log = logging.getLogger(__name__)
BATCH = 1000  # alerts per POST
RESOLVED_KEEP_S = 900.0  # Prometheus' resolvedRetention: a resolved alert is dropped after it
VALID_INTERVALS = 4


@dataclass
class Delivery:
    """What one delivery did: alerts sent, and the URLs that failed (with why)."""

    sent: int = 0
    """Alerts sent to each URL that took them."""
    failed: dict[int, str] = field(default_factory=dict)
    """Why delivery failed, by the URL's position in FLEETSCOPE_ALERTMANAGER_URL (positions,
    not URLs, travel in retried tasks: a URL may hold credentials)."""
    resolved_done: int = 0


def target(url: str) -> str:
    """A URL's scheme, host and port: what logs and metric labels name (never userinfo)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def postable(alert: Alert, ends_at: str) -> dict[str, Any]:
    """An Alertmanager v2 `postableAlert`."""
    out: dict[str, Any] = {
        "labels": alert.get("labels", {}),
        "annotations": alert.get("annotations", {}),
        "startsAt": alert.get("startsAt"),
        "endsAt": alert.get("endsAt", ends_at),
    }
    if alert.get("generatorURL"):
        out["generatorURL"] = alert["generatorURL"]
    return out


def pending(
    r: redis.Redis, settings: Settings, now: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """What to send now: every firing alert and the resolved ones not yet delivered; and the
    resolved ids included (to forget once every URL took them)."""
    firing, resolved = redis_client.pipelined(
        r, [("HGETALL", keys.ALERT_FIRING), ("HGETALL", keys.ALERT_RESOLVED)]
    )
    valid = state.iso(now + VALID_INTERVALS * settings.alert_interval_s)
    out = [postable(state.loads(v), valid) for _, v in _pairs(firing)]
    ids: list[str] = []
    for k, v in _pairs(resolved):
        out.append(postable(state.loads(v), valid))
        ids.append(redis_client.text(k))
    return out, ids


def deliver(
    r: redis.Redis, settings: Settings, only: Sequence[int] | None = None, now: float | None = None
) -> Delivery:
    """Send the pending alerts to the configured URLs (`only`: those at these positions)."""
    now = time.time() if now is None else now
    configured = settings.alertmanager_url
    picked = range(len(configured)) if only is None else [i for i in only if i < len(configured)]
    urls = {i: configured[i] for i in picked}
    result = Delivery()
    if not urls:
        return result
    alerts, resolved_ids = pending(r, settings, now)
    try:
        session = _session(settings)
    except DeliveryFailed as e:
        log.warning("alert delivery: %s", e)
        return Delivery(failed={i: str(e) for i in urls})
    for i, url in urls.items():
        try:
            for i in range(0, len(alerts), BATCH):
                _post(session, url, alerts[i : i + BATCH], settings.alertmanager_timeout_s)
            result.sent = len(alerts)
        except DeliveryFailed as e:
            result.failed[i] = str(e)
            log.warning("alert delivery to %s failed: %s", target(url), e)
    if resolved_ids and not result.failed:
        r.hdel(keys.ALERT_RESOLVED, *resolved_ids)
        result.resolved_done = len(resolved_ids)
    elif resolved_ids:
        _expire_resolved(r, now)
    return result


class DeliveryFailed(Exception):
    pass


def _post(
    session: requests.Session, url: str, alerts: list[dict[str, Any]], timeout: float
) -> None:
    endpoint = url.rstrip("/") + "/api/v2/alerts"
    try:
        resp = session.post(endpoint, json=alerts, timeout=(min(timeout, 5.0), timeout))
    except requests.RequestException as e:
        raise DeliveryFailed(type(e).__name__) from None  # its text may quote the URL
    if resp.status_code >= 300:
        raise DeliveryFailed(f"HTTP {resp.status_code}: {resp.text[:200]!r}")


def _session(settings: Settings) -> requests.Session:
    s = requests.Session()
    s.trust_env = False  # no proxy or netrc credentials picked up from the environment
    if settings.alertmanager_ca_file:
        s.verify = settings.alertmanager_ca_file
    if settings.alertmanager_cert_file:
        s.cert = (settings.alertmanager_cert_file, settings.alertmanager_key_file)
    if settings.alertmanager_bearer_token_file:
        s.headers["Authorization"] = f"Bearer {_secret(settings.alertmanager_bearer_token_file)}"
    elif settings.alertmanager_password_file or settings.alertmanager_username:
        password = (
            _secret(settings.alertmanager_password_file)
            if settings.alertmanager_password_file
            else ""
        )
        s.auth = (settings.alertmanager_username, password)
    return s


def _secret(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as e:
        raise DeliveryFailed(f"cannot read a credentials file: {e.strerror}") from None


def _expire_resolved(r: redis.Redis, now: float) -> None:
    """Forget resolved alerts older than RESOLVED_KEEP_S that some URL never took."""
    raw = r.hgetall(keys.ALERT_RESOLVED)
    old = []
    for k, v in raw.items():
        at = epoch(state.loads(v).get("endsAt", ""))
        if at is not None and now - at > RESOLVED_KEEP_S:
            old.append(k)
    if old:
        r.hdel(keys.ALERT_RESOLVED, *old)


def _pairs(reply: Any) -> Any:
    if isinstance(reply, dict):
        return reply.items()
    return zip(reply[::2], reply[1::2], strict=True)
