"""One alert evaluation: incremental over the index, its state in Redis.

Each evaluation reads the registered clusters' generations (common.index.keys.generation; a
cluster's rows change only with it) and re-reads, rule by rule through the list reader
(common.index.read.reader, with access to every kind), only the clusters whose generation moved since
the last evaluation, plus the rows whose `for` has just elapsed (the `due` zset). A changed rules
file re-reads every cluster once. An evaluation spends about `CPU_BUDGET_S` of CPU on
clusters: what it could not read (a start or a rules change at fleet L, or a fleet whose every
cluster was written since) waits for the next evaluation, which starts where this one stopped
(`#next`), so every cluster is read within a few intervals and no evaluation runs long.
Everything it decides (matching rows and since when, firing
and resolved alerts) is written in one transaction fenced by the evaluator's lease, so a restart
of the evaluator loses nothing and two evaluators never both write.
"""

from __future__ import annotations

import calendar
import functools
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import redis

from common import redis_client
from common.alerts import state
from common.alerts.rules import Rule, RuleSet
from common.alerts.state import Alert, Candidate
from common.index import keys, lease, syncstatus
from common.index.read.reader import PageRequest, Reader
from common.rbac.grants import Access

PAGE = 500  # rows per reader page while collecting a rule's matches
CPU_BUDGET_S = 0.6
"""CPU seconds an evaluation may spend on clusters (reading them, and the alerts their new or
gone matches will render: `RENDER_S` each) before it leaves the rest to the next one."""
RENDER_S = 60e-6  # per match that appeared or went: comparing, rendering, writing (at L)
CHUNK = 5  # clusters matched between two looks at the budget
LOG_MAX = 50  # evaluations kept in `keys.ALERT_LOG`
_PLAIN = re.compile(r"^[A-Za-z0-9._~-]*$")  # needs no percent-encoding in a query
ROW_FIELDS = ("status", "reason", "message", "revision", "lastTransitionTime", "apiVersion")


@dataclass
class Outcome:
    """What one evaluation did (for logs, metrics and tests)."""

    clusters: int = 0
    changed: int = 0
    """Clusters read this evaluation."""
    deferred: int = 0
    """Clusters written since they were last read, left to the next evaluation (the budget)."""
    due: int = 0
    firing: int = 0
    fired: int = 0
    resolved: int = 0


@dataclass
class _Plan:
    """The evaluation's writes, gathered before the one transaction."""

    cand_updates: dict[str, dict[str, Candidate]] = field(default_factory=dict)  # changed ones
    cand_deletes: dict[str, list[str]] = field(default_factory=dict)  # matches no more
    due_add: dict[str, float] = field(default_factory=dict)
    due_rem: set[str] = field(default_factory=set)
    ripe_set: dict[str, dict[str, Any]] = field(default_factory=dict)
    firing_set: dict[str, Alert] = field(default_factory=dict)
    firing_del: set[str] = field(default_factory=set)
    resolved_set: dict[str, Alert] = field(default_factory=dict)


@functools.lru_cache(maxsize=65536)  # rows of one sync share few transition times
def epoch(iso: str | None) -> float | None:
    """An RFC 3339 time (`2024-01-02T03:04:05...`) as epoch seconds; None if it is not one.
    Sliced rather than strptime'd: it runs for every row a rule matches."""
    if not iso or len(iso) < 19 or iso[4] != "-" or iso[10] not in "Tt ":
        return None
    try:
        parts = (iso[0:4], iso[5:7], iso[8:10], iso[11:13], iso[14:16], iso[17:19])
        return float(calendar.timegm((*map(int, parts), 0, 0, 0)))
    except ValueError:
        return None


class Evaluator:
    """Evaluates a rule set against the index (one per process; not thread-safe)."""

    def __init__(self, r: redis.Redis, all_kinds: Sequence[str], external_url: str) -> None:
        self.r = r
        self.reader = Reader(r, all_kinds, pages_max=0)
        self.everything = Access.build(frozenset(all_kinds), {})
        self.external_url = external_url.rstrip("/")

    def run(self, rules: RuleSet, fence: lease.Fence | None, now: float | None = None) -> Outcome:
        now = time.time() if now is None else now
        clusters = syncstatus.registered_clusters(self.r)
        gens_raw, seen_raw, due_raw = redis_client.pipelined(
            self.r,
            [
                ("MGET", *(keys.generation(c) for c in clusters)) if clusters else ("PING",),
                ("HGETALL", keys.ALERT_GENS),
                ("ZRANGEBYSCORE", keys.ALERT_DUE, "-inf", repr(now)),
            ],
        )
        gens = {
            c: redis_client.text(g or b"0") for c, g in zip(clusters, gens_raw or [], strict=False)
        }
        seen = {redis_client.text(k): redis_client.text(v) for k, v in _pairs(seen_raw)}
        rules_changed = seen.get("#rules") != rules.digest
        gone = [c for c in seen if c[:1] != "#" and c not in gens]
        changed = [c for c in clusters if rules_changed or seen.get(c) != gens[c]]
        changed += self._still_flapping(rules, [c for c in clusters if c not in set(changed)])
        changed = _from_cursor(changed, seen.get("#next", ""))
        new, old, deferred = self._read_within_budget(rules, changed, now)
        changed = changed[: len(changed) - len(deferred)]
        out = Outcome(clusters=len(clusters), changed=len(changed), deferred=len(deferred))
        plan = _Plan()
        touched: dict[str, tuple[str, str, str, str]] = {}  # object key -> (rule, ns, kind, name)
        changes: list[tuple[str, str, Candidate | None]] = []  # (cluster, field, now-state)
        old.update(self._read_cands(gone))
        for cluster in [*changed, *gone]:
            before, after = old.get(cluster, {}), new.get(cluster, {})
            for f, cand in after.items():
                prev = before.get(f)
                if prev is not None:
                    cand["since"] = prev["since"]
                rule = rules.get(state.rule_of(f))
                assert rule is not None
                cand["ripe"] = cand["since"] + rule.for_s <= now
                if not cand["ripe"]:
                    plan.due_add[state.due_member(cluster, f)] = cand["since"] + rule.for_s
            for f, prev in before.items():
                if not prev["ripe"]:
                    plan.due_rem.add(state.due_member(cluster, f))
            # Only what changed is written and re-rendered: a cluster is re-read whole when
            # any of its rows was written, most of its matches stay as they were.
            moved = {f: c for f, c in after.items() if before.get(f) != c}
            if moved:
                plan.cand_updates[cluster] = moved
            left = [f for f in before if f not in after]
            if left:
                plan.cand_deletes[cluster] = left
            for f in [*moved, *left]:
                changes.append((cluster, f, after.get(f)))
        changed_set = set(changed) | set(gone)
        due = [state.split_due(redis_client.text(m)) for m in due_raw]
        due = [(c, f) for c, f in due if c not in changed_set and c in gens]
        out.due = len(due)
        for (cluster, f), stored in zip(due, self._read_due(due), strict=True):
            plan.due_rem.add(state.due_member(cluster, f))
            if stored is None:
                continue
            stored["ripe"] = True
            plan.cand_updates.setdefault(cluster, {})[f] = stored
            changes.append((cluster, f, stored))
        self._alerts(rules, changes, rules_changed, now, plan, touched, out)
        cursor = (deferred[0] if deferred else "", "#next" in seen)
        self._write(plan, gens, gone, cursor, deferred, rules.digest, fence, now, out)
        return out

    def _read_within_budget(
        self, rules: RuleSet, changed: Sequence[str], now: float
    ) -> tuple[dict[str, dict[str, Candidate]], dict[str, dict[str, Candidate]], list[str]]:
        """The matches (new) and stored candidates (old) of the changed clusters read within
        the budget, and the clusters left. The cost counted is the reading so far plus what
        rendering will cost: `RENDER_S` for each match that appeared or went."""
        started = time.process_time()
        new: dict[str, dict[str, Candidate]] = {}
        old: dict[str, dict[str, Candidate]] = {}
        moved = 0
        for i in range(0, len(changed), CHUNK):
            spent = time.process_time() - started + moved * RENDER_S
            if i and spent > CPU_BUDGET_S:
                return new, old, list(changed[i:])
            chunk = changed[i : i + CHUNK]
            new.update(self._match(rules, chunk, now))
            old.update(self._read_cands(chunk))
            moved += sum(len(new[c].keys() ^ old.get(c, {}).keys()) for c in chunk)
        return new, old, []

    def _read_cands(self, clusters: Sequence[str]) -> dict[str, dict[str, Candidate]]:
        if not clusters:
            return {}
        replies = redis_client.pipelined(
            self.r, [("HGETALL", keys.alert_candidates(c)) for c in clusters]
        )
        return {
            c: {redis_client.text(k): state.loads(v) for k, v in _pairs(reply)}
            for c, reply in zip(clusters, replies, strict=True)
        }

    def _read_due(self, due: Sequence[tuple[str, str]]) -> list[Candidate | None]:
        if not due:
            return []
        replies = redis_client.pipelined(
            self.r, [("HGET", keys.alert_candidates(c), f) for c, f in due]
        )
        return [state.loads(v) if v is not None else None for v in replies]

    def _still_flapping(self, rules: RuleSet, clusters: Sequence[str]) -> list[str]:
        """Clusters read again although unwritten, for `flapping: true` rules: transitions age
        out of the 24 hours without a write, so a row may stop (never start) flapping. Only
        clusters whose flapping index holds rows (small; empty on a calm fleet)."""
        if not clusters or not any(rule.filters.flapping for rule in rules.rules):
            return []
        sizes = redis_client.pipelined(self.r, [("ZCARD", keys.flapping(c)) for c in clusters])
        return [c for c, n in zip(clusters, sizes, strict=True) if n]

    def _match(
        self, rules: RuleSet, clusters: Sequence[str], now: float
    ) -> dict[str, dict[str, Candidate]]:
        """Per changed cluster, the rows each rule matches now (`since` from their transition
        time, or now when they have none)."""
        out: dict[str, dict[str, Candidate]] = {c: {} for c in clusters}
        if not clusters:
            return out
        access = {c: self.everything for c in clusters}
        for rule in rules.rules:
            cursor = None
            while True:
                page = self.reader.page(access, PageRequest(rule.filters, PAGE, cursor))
                for row in page.rows:
                    ltt = epoch(row["lastTransitionTime"])
                    since = ltt if ltt is not None and ltt <= now else now
                    f = state.cand_field(rule.name, row["namespace"], row["kind"], row["name"])
                    kept = {k: row[k] for k in ROW_FIELDS}  # type: ignore[literal-required]
                    out[row["cluster"]][f] = Candidate(since=since, ripe=False, row=kept)
                if page.cursor is None:
                    break
                cursor = page.cursor
        return out

    # -- alerts ------------------------------------------------------------------------------

    def _alerts(
        self,
        rules: RuleSet,
        changes: Iterable[tuple[str, str, Candidate | None]],
        rules_changed: bool,
        now: float,
        plan: _Plan,
        touched: dict[str, tuple[str, str, str, str]],
        out: Outcome,
    ) -> None:
        """Firing and resolved alerts for what changed (rows, ripeness, rules)."""
        per_row: dict[str, tuple[Rule | None, str, str, Candidate | None]] = {}
        cross: dict[str, dict[str, Candidate | None]] = {}
        for cluster, f, cand in changes:
            rule_name, ns, kind, name = state.split_cand(f)
            rule = rules.get(rule_name)
            if rule is not None and rule.cross_cluster:
                cross.setdefault(f, {})[cluster] = cand
                touched[f] = (rule_name, ns, kind, name)
            else:
                aid = state.alert_id(rule_name, cluster, ns, kind, name)
                per_row[aid] = (rule, cluster, f, cand)
        existing = self._firing(list(per_row) + [self._cross_id(f) for f in cross])
        ripe = self._ripe(list(cross))
        for aid, (rule, cluster, f, cand) in per_row.items():
            if rule is not None and cand is not None and cand["ripe"]:
                _, ns, kind, name = state.split_cand(f)
                values = {"cluster": cluster, "namespace": ns, "kind": kind, "name": name}
                self._fire(plan, aid, rule, values, cand["row"], [cluster], existing, now, out)
            elif aid in existing:
                self._resolve(plan, aid, existing[aid], now, out)
        for f, by_cluster in cross.items():
            rule_name, ns, kind, name = touched[f]
            rule = rules.get(rule_name)
            members = dict(ripe.get(f, {}))
            for cluster, cand in by_cluster.items():
                if cand is not None and cand["ripe"]:
                    members[cluster] = cand["row"]
                else:
                    members.pop(cluster, None)
            plan.ripe_set[f] = members
            aid = self._cross_id(f)
            if rule is not None and len(members) >= rule.min_clusters:
                names = sorted(members)
                values = {"cluster": "", "namespace": ns, "kind": kind, "name": name}
                row = members[names[0]]
                self._fire(plan, aid, rule, values, row, names, existing, now, out)
            elif aid in existing:
                self._resolve(plan, aid, existing[aid], now, out)
        if rules_changed:
            self._drop_removed_rules(rules, plan, now, out)

    @staticmethod
    def _cross_id(f: str) -> str:
        rule, ns, kind, name = state.split_cand(f)
        return state.alert_id(rule, "", ns, kind, name)

    def _firing(self, ids: Sequence[str]) -> dict[str, Alert]:
        if not ids:
            return {}
        values = self.r.hmget(keys.ALERT_FIRING, list(ids))
        return {a: state.loads(v) for a, v in zip(ids, values, strict=True) if v is not None}

    def _ripe(self, fields: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not fields:
            return {}
        values = self.r.hmget(keys.ALERT_RIPE, list(fields))
        return {f: state.loads(v) for f, v in zip(fields, values, strict=True) if v is not None}

    def _fire(
        self,
        plan: _Plan,
        aid: str,
        rule: Rule,
        ident: Mapping[str, str],
        row: Mapping[str, Any],
        clusters: list[str],
        existing: Mapping[str, Alert],
        now: float,
        out: Outcome,
    ) -> None:
        values: dict[str, object] = {**row, **ident, "rule": rule.name, "severity": rule.severity}
        values["clusters"] = len(clusters)
        values["clusterNames"] = ",".join(clusters)
        labels = {
            "alertname": rule.name,
            "severity": rule.severity,
            **{k: v for k, v in ident.items() if v},
        }
        for k, t in rule.labels.items():
            labels[k] = t.render(values, label=True)
        labels = {k: v for k, v in labels.items() if v}  # Alertmanager drops empty labels
        alert = Alert(
            rule=rule.name,
            severity=rule.severity,
            namespace=ident["namespace"],
            kind=ident["kind"],
            name=ident["name"],
            labels=labels,
            annotations={k: t.render(values) for k, t in rule.annotations.items()},
            startsAt=state.iso(now),
            generatorURL=self._link(ident, cross=rule.cross_cluster),
            status=str(row.get("status", "")),
            reason=str(row.get("reason", "")),
            message=str(row.get("message", ""))[:1024],
        )
        if rule.cross_cluster:
            alert["clusters"] = clusters
        else:
            alert["cluster"] = ident["cluster"]
        prev = existing.get(aid)
        if prev is not None and prev.get("labels") == labels:
            alert["startsAt"] = prev["startsAt"]
        elif prev is not None:  # another label set: Alertmanager's old alert ends now
            self._resolve(plan, aid + state.SEP + "relabelled", prev, now, out)
        else:
            out.fired += 1
        if prev != alert:
            plan.firing_set[aid] = alert

    def _resolve(self, plan: _Plan, aid: str, alert: Alert, now: float, out: Outcome) -> None:
        base = aid.removesuffix(state.SEP + "relabelled")
        if base == aid:
            plan.firing_del.add(aid)
        plan.resolved_set[aid] = Alert(**{**alert, "endsAt": state.iso(now)})
        out.resolved += 1

    def _drop_removed_rules(self, rules: RuleSet, plan: _Plan, now: float, out: Outcome) -> None:
        """After a rules change: resolve alerts of rules that no longer exist, forget their
        cross-cluster state."""
        names = {r.name for r in rules.rules}
        raw = redis_client.pipelined(
            self.r, [("HGETALL", keys.ALERT_FIRING), ("HKEYS", keys.ALERT_RIPE)]
        )
        for k, v in _pairs(raw[0]):
            aid = redis_client.text(k)
            if state.rule_of(aid) not in names and aid not in plan.firing_del:
                self._resolve(plan, aid, state.loads(v), now, out)
                plan.firing_set.pop(aid, None)
        for k in raw[1]:
            f = redis_client.text(k)
            if state.rule_of(f) not in names:
                plan.ripe_set[f] = {}

    def _link(self, ident: Mapping[str, str], cross: bool) -> str:
        """The web view's list, narrowed to the object (query/static/list.js reads these)."""
        q = [("namespace", ident["namespace"] or "_"), ("kind", ident["kind"])]
        q.append(("name", ident["name"]))
        if cross:
            q.append(("group", "object"))
        else:
            q.insert(0, ("cluster", ident["cluster"]))
        query = "&".join(f"{k}={v if _PLAIN.fullmatch(v) else quote(v, safe='')}" for k, v in q)
        return f"{self.external_url}/?{query}"

    # -- the one write -----------------------------------------------------------------------

    def _write(
        self,
        plan: _Plan,
        gens: Mapping[str, str],
        gone: Sequence[str],
        cursor: tuple[str, bool],
        deferred: Sequence[str],
        digest: str,
        fence: lease.Fence | None,
        now: float,
        out: Outcome,
    ) -> None:
        pipe: Any = self.r.pipeline(transaction=True)
        try:
            lease.check(pipe, fence, "alert evaluation")
            pipe.multi()
            left = set(deferred)
            read = {c: g for c, g in gens.items() if c not in left}
            pipe.hset(keys.ALERT_GENS, mapping={**read, "#rules": digest})
            # Left for the next evaluation: no generation seen (so they count as changed, also
            # after a rules change), and the next one starts with them.
            if gone or deferred:
                pipe.hdel(keys.ALERT_GENS, *gone, *deferred)
            if cursor[0]:
                pipe.hset(keys.ALERT_GENS, "#next", cursor[0])
            elif cursor[1]:  # `(next, was set)`: the previous evaluation left clusters
                pipe.hdel(keys.ALERT_GENS, "#next")
            for cluster, cands in plan.cand_updates.items():
                pipe.hset(
                    keys.alert_candidates(cluster),
                    mapping={f: state.dumps(c) for f, c in cands.items()},
                )
            for cluster, fields in plan.cand_deletes.items():
                pipe.hdel(keys.alert_candidates(cluster), *fields)
            rem = plan.due_rem - set(plan.due_add)
            if rem:
                pipe.zrem(keys.ALERT_DUE, *rem)
            if plan.due_add:
                pipe.zadd(keys.ALERT_DUE, plan.due_add)
            empty = [f for f, m in plan.ripe_set.items() if not m]
            if empty:
                pipe.hdel(keys.ALERT_RIPE, *empty)
            full = {f: state.dumps(m) for f, m in plan.ripe_set.items() if m}
            if full:
                pipe.hset(keys.ALERT_RIPE, mapping=full)
            if plan.firing_del:
                pipe.hdel(keys.ALERT_FIRING, *plan.firing_del)
            if plan.firing_set:
                pipe.hset(
                    keys.ALERT_FIRING,
                    mapping={a: state.dumps(v) for a, v in plan.firing_set.items()},
                )
                pipe.hdel(keys.ALERT_RESOLVED, *plan.firing_set)  # fired again: not resolved
            if plan.resolved_set:
                pipe.hset(
                    keys.ALERT_RESOLVED,
                    mapping={a: state.dumps(v) for a, v in plan.resolved_set.items()},
                )
            pipe.hincrby(keys.ALERT_META, "evaluations", 1)
            pipe.hset(keys.ALERT_META, "evaluatedAt", repr(now))
            who = fence.token if fence is not None else "-"
            pipe.lpush(
                keys.ALERT_LOG,
                f"{now!r} {who} changed={out.changed} deferred={out.deferred} due={out.due}",
            )
            pipe.ltrim(keys.ALERT_LOG, 0, LOG_MAX - 1)
            pipe.hlen(keys.ALERT_FIRING)
            out.firing = int(pipe.execute()[-1])
        finally:
            pipe.reset()


def _pairs(reply: Any) -> Iterable[tuple[Any, Any]]:
    """A raw HGETALL reply (a flat list, or a dict under RESP3/callbacks) as pairs."""
    if isinstance(reply, dict):
        return reply.items()
    return zip(reply[::2], reply[1::2], strict=True)


def _from_cursor(clusters: list[str], cursor: str) -> list[str]:
    """The clusters (in registry order) rotated to start at `cursor`, where the previous
    evaluation stopped, so that a fleet written faster than one budget reads is still read
    in turn, every cluster within a few evaluations."""
    if not cursor or cursor not in clusters:
        return clusters
    i = clusters.index(cursor)
    return clusters[i:] + clusters[:i]
