"""The rules in force: the rules file, checked at each evaluation (its stat, then its hash) and
re-parsed when it changed. A file that does not parse keeps the previous rules running and is
reported (the log, `fs:{alerts}:meta`'s `error`, which /api/v1/alerts and the evaluator's metric
show). The last good text is kept in Redis, so a restarted evaluator facing a bad file still
runs the rules that were in force."""

from __future__ import annotations

import hashlib
import logging
import os
import time

import redis

from common import redis_client
from common.alerts import rules as rules_mod
from common.alerts.rules import EMPTY, RuleError, RuleSet
from common.index import keys
from common.kinds.registry import KindRegistry

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 1 << 20


class RulesSource:
    def __init__(self, path: str, registry: KindRegistry, flapping_threshold: int = 4) -> None:
        self.path, self.registry = path, registry
        self.flapping_threshold = flapping_threshold
        self._stat: tuple[int, int, int] | None = None
        self._digest = ""
        self.rules: RuleSet | None = None
        self.error = ""

    def check(self) -> str:
        """Validate the file now (start-up): "" when it is good, else the error (also logged)."""
        try:
            rules_mod.parse(
                self._read(), self.registry, os.path.basename(self.path), self.flapping_threshold
            )
        except (RuleError, OSError) as e:
            msg = _message(e, self.path)
            log.error("alert rules refused: %s", msg)
            return msg
        return ""

    def current(self, r: redis.Redis) -> RuleSet:
        """The rules to evaluate, re-read if the file changed; reports a bad file in Redis."""
        if not self.path:
            return EMPTY
        try:
            st = os.stat(self.path)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
            if sig != self._stat:
                self._load(r, self._read())
                self._stat = sig
        except OSError as e:
            self._refuse(r, _message(e, self.path))
        if self.rules is None:
            self.rules = self._last_good(r)
        return self.rules

    def _read(self) -> str:
        with open(self.path, encoding="utf-8") as f:
            text = f.read(MAX_FILE_BYTES + 1)
        if len(text) > MAX_FILE_BYTES:
            raise OSError(0, f"larger than {MAX_FILE_BYTES} bytes")
        return text

    def _load(self, r: redis.Redis, text: str) -> None:
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self._digest and self.rules is not None and not self.error:
            return
        try:
            parsed = rules_mod.parse(
                text, self.registry, os.path.basename(self.path), self.flapping_threshold
            )
        except RuleError as e:
            self._digest = digest
            self._refuse(r, str(e))
            return
        self.rules, self.error, self._digest = parsed, "", digest
        r.hset(
            keys.ALERT_META,
            mapping={"rules": text, "ruleCount": len(parsed.rules), "loadedAt": repr(time.time())},
        )
        r.hdel(keys.ALERT_META, "error", "errorAt")
        log.info("alert rules loaded: %d rules", len(parsed.rules))

    def _refuse(self, r: redis.Redis, msg: str) -> None:
        if msg != self.error:
            log.error("alert rules refused, the previous rules keep running: %s", msg)
        self.error = msg
        r.hset(keys.ALERT_META, mapping={"error": msg, "errorAt": repr(time.time())})

    def _last_good(self, r: redis.Redis) -> RuleSet:
        raw = r.hget(keys.ALERT_META, "rules")
        if raw is None:
            return EMPTY
        try:
            return rules_mod.parse(
                redis_client.text(raw), self.registry, "last good rules", self.flapping_threshold
            )
        except RuleError:
            return EMPTY  # written by another version: nothing to run rather than a guess


def _message(e: Exception, path: str) -> str:
    if isinstance(e, RuleError):
        return str(e)
    reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
    return f"{os.path.basename(path)}: cannot read: {reason}"
