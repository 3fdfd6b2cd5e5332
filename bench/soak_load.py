"""What the soak does to the stack while it runs, each in its own thread and each recording into
one `Record`: requests at a steady rate (`Load`), status transitions and status-unchanged updates
in kubesim (`Churn`), freshness probes (a change in kubesim -> visible in the list API), RBAC
changes with the revocation time (`RbacChurn`), watch streams (`Streams`) and walks that follow
continue tokens to the end (`Walks`)."""

from __future__ import annotations

import itertools
import random
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubesim.server import KubeSim
from tests.reliability.stack import http_json
from tests.support.sse import Stream

WIDE_USER = "wide-user"
WIDE_NAMESPACES = 25
"""The many-namespace user may list this many app namespaces of every cluster, evenly spread
(5,000 namespaces at L: a fixed count, so its walks stay a few dozen pages at any preset)."""
POLL_S = 0.05


def headers(user: str, groups: tuple[str, ...] = ()) -> dict[str, str]:
    h = {"X-Remote-User": user}
    if groups:
        h["X-Remote-Group"] = ",".join(groups)
    return h


ADMIN = headers("admin-0", ("fleet-admins",))
CALLERS = {
    "admin": ADMIN,
    "team-00": headers("dev-team-00", ("team-00",)),
    "team-01": headers("dev-team-01", ("team-01",)),
    "wide": headers(WIDE_USER),
}


@dataclass
class Record:
    """Everything measured, appended from many threads (list.append is atomic)."""

    started: float = field(default_factory=time.monotonic)
    requests: list[tuple[float, str, int, str, float]] = field(default_factory=list)
    # (made at, made -> visible or None, cluster, made -> the leaf sent its watch event or None)
    freshness: list[tuple[float, float | None, str, float | None]] = field(default_factory=list)
    revocations: list[dict[str, Any]] = field(default_factory=list)
    walks: list[dict[str, Any]] = field(default_factory=list)
    streams: Counter[str] = field(default_factory=Counter)
    churn: Counter[str] = field(default_factory=Counter)
    probed: set[tuple[str, str]] = field(default_factory=set)
    failed: list[dict[str, Any]] = field(default_factory=list)

    def now_s(self) -> float:
        return time.monotonic() - self.started

    def get(self, base: str, path: str, h: dict[str, str], kind: str) -> tuple[int, Any]:
        """GET and record the answer at the time it was asked (a fault's window holds the
        requests made during it, however long they then took)."""
        asked = self.now_s()
        code, body = http_json(base + path, h)
        err = (body or {}).get("error", "") if isinstance(body, dict) and code != 200 else ""
        done = self.now_s()
        self.requests.append((round(asked, 2), kind, code, err or "", round(done, 2)))
        if code != 200:
            took = round(done - asked, 2)
            self.failed.append({"at_s": round(asked, 2), "took_s": took, "path": path,
                                "code": code, "error": err or "", "base": base,
                                "user": h.get("X-Remote-User", "")})  # fmt: skip
        return code, body


def app_namespaces(sim: KubeSim) -> list[str]:
    first = sim.clusters[0]
    return sorted(
        n["metadata"]["name"]
        for n in sim.list(first, "Namespace")
        if n["metadata"]["name"].startswith("app-")
    )


def add_wide_user(sim: KubeSim) -> None:
    """RoleBindings giving `wide-user` the team role in WIDE_NAMESPACES app namespaces of
    every cluster."""
    namespaces = app_namespaces(sim)
    wide = namespaces[:: max(1, len(namespaces) // WIDE_NAMESPACES)][:WIDE_NAMESPACES]
    for c in sim.clusters:
        bindings = sim.list(c, "RoleBinding")
        team_view = next(b for b in bindings if b["metadata"]["name"] == "team-view")
        for ns in wide:
            sim.apply(c, wide_binding(ns, team_view["roleRef"]))


def wide_binding(ns: str, role_ref: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "soak-wide", "namespace": ns},
        "roleRef": role_ref,
        "subjects": [{"kind": "User", "name": WIDE_USER, "apiGroup": "rbac.authorization.k8s.io"}],
    }


class Looping(threading.Thread):
    """A daemon thread running `step()` until stopped; errors are counted, not fatal."""

    def __init__(self, record: Record, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.record, self.stop_event = record, threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.step()
            except Exception as e:
                self.record.churn[f"{self.name} error {type(e).__name__}"] += 1
                self.stop_event.wait(1)

    def step(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stop_event.set()


class Load(Looping):
    """`rate` requests a second over every query process, from every caller."""

    def __init__(self, record: Record, bases: list[str], targets: list[Any], rate: float) -> None:
        super().__init__(record, "load")
        self.bases, self.rate = itertools.cycle(bases), rate
        self.targets, self.sent = itertools.cycle(targets), 0

    def step(self) -> None:
        kind, path, h = next(self.targets)
        self.record.get(next(self.bases), path, h, kind)
        self.sent += 1
        delay = self.record.started + self.sent / self.rate - time.monotonic()
        self.stop_event.wait(max(0.0, delay))


def targets(sim: KubeSim, probe_ns: list[str]) -> list[tuple[str, str, dict[str, str]]]:
    """What the load asks, in turn: as many fleet-wide reads (lists, groups, facets, status of
    every caller, in turn) as reads of one object (detail, relations, history of a probe object
    on each cluster): at L an object list alone would be 600 of every 620 requests."""
    fleet = []
    for h in CALLERS.values():
        fleet += [
            ("list", "/api/v1/objects?limit=50", h),
            ("list", "/api/v1/objects?status=unhealthy&limit=50", h),
            ("groups", "/api/v1/groups?limit=20", h),
            ("facets", "/api/v1/facets", h),
            ("status", "/api/v1/status", h),
        ]
    out = []
    for i, c in enumerate(sim.clusters):
        obj = f"/api/v1/objects/{c}/{probe_ns[0]}/Kustomization/apps"
        out += [("detail", obj, ADMIN), ("relations", obj + "/relations", ADMIN)]
        out += [("history", obj + "/history?limit=20", ADMIN)]
        out += [fleet[(3 * i + k) % len(fleet)] for k in range(3)]
    return out


class Churn(Looping):
    """Status transitions (`per_s`) and status-unchanged updates (`unchanged_per_s`) of the
    `apps` Kustomizations of `namespaces` on random clusters, paced by the clock."""

    def __init__(
        self, record: Record, sim: KubeSim, namespaces: list[str], per_s: float, unchanged: float
    ) -> None:
        super().__init__(record, "churn")
        self.sim, self.namespaces, self.rng = sim, namespaces, random.Random(7)
        self.per_s, self.unchanged, self.done = per_s, unchanged, 0
        self.ready: dict[tuple[str, str], bool] = {}

    def step(self) -> None:
        total = self.per_s + self.unchanged
        c, ns = self.rng.choice(self.sim.clusters), self.rng.choice(self.namespaces)
        if self.rng.random() < self.per_s / total:
            ready = not self.ready.get((c, ns), True)
            self.sim.set_ready(c, "Kustomization", ns, "apps", ready, message="soak churn")
            self.ready[(c, ns)] = ready
            self.record.churn["transitions"] += 1
        else:
            note = {"metadata": {"annotations": {"soak.fleetscope.io/tick": str(self.done)}}}
            self.sim.patch(c, "Kustomization", ns, "apps", note)
            self.record.churn["unchanged updates"] += 1
        self.done += 1
        self.stop_event.wait(max(0.0, self.record.started + self.done / total - time.monotonic()))


class Freshness(Looping):
    """Every `every_s`: a transition of a probe object on a cluster without a leaf fault, timed
    until the list API shows it (None after `timeout_s`), and until the leaf (kubesim) sent its
    watch event to a watcher (its delivery stamp; None when no watch stream got it): the
    simulator's own share, which `soak_invariants.freshness` leaves out of the invariant."""

    def __init__(
        self, record: Record, sim: KubeSim, bases: list[str], namespaces: list[str],
        faulted: dict[str, str], every_s: float = 1.0, timeout_s: float = 60.0,
    ) -> None:  # fmt: skip
        super().__init__(record, "freshness")
        self.sim, self.bases, self.namespaces, self.faulted = sim, bases, namespaces, faulted
        self.every_s, self.timeout_s, self.n = every_s, timeout_s, 0

    def step(self) -> None:
        self.n += 1
        clusters = [c for c in self.sim.clusters if c not in self.faulted]
        c = clusters[self.n % len(clusters)]
        ns = self.namespaces[(self.n // len(self.sim.clusters)) % len(self.namespaces)]
        msg = f"soak probe {self.n}"
        t0, at = time.monotonic(), self.record.now_s()
        obj = self.sim.set_ready(c, "Kustomization", ns, "apps", self.n % 2 == 0, message=msg)
        self.record.probed.add((c, ns))
        path = f"/api/v1/objects?cluster={c}&namespace={ns}&kind=Kustomization"
        base = self.bases[self.n % len(self.bases)]
        seen: float | None = None
        while time.monotonic() - t0 < self.timeout_s and not self.stop_event.is_set():
            code, body = http_json(base + path, ADMIN)
            if code == 200 and any(r.get("message") == msg for r in body["items"]):
                seen = time.monotonic() - t0
                break
            time.sleep(POLL_S)
        if seen is None and self.stop_event.is_set():
            return  # cut short by the run's end: nothing measured
        rv = obj["metadata"]["resourceVersion"]
        sent = self.sim.delivery(c, "Kustomization", ns, "apps", rv)
        leaf = None if sent is None else round(sent.delivered_s - t0, 3)
        self.record.freshness.append(
            (round(at, 2), None if seen is None else round(seen, 3), c, leaf)
        )
        self.stop_event.wait(max(0.0, self.every_s - (time.monotonic() - t0)))


class RbacChurn(Looping):
    """Every `every_s`, alternately: delete a team's `team-view` RoleBinding (timed until the
    team no longer lists the namespace; then checked every second until it is restored), and
    restore the last one deleted."""

    def __init__(
        self, record: Record, sim: KubeSim, bases: list[str], faulted: dict[str, str],
        every_s: float, bound_s: float,
    ) -> None:  # fmt: skip
        super().__init__(record, "rbac")
        self.sim, self.bases, self.faulted, self.rng = sim, bases, faulted, random.Random(11)
        self.every_s, self.bound_s = every_s, bound_s

    def step(self) -> None:
        self.stop_event.wait(self.every_s)
        clusters = [c for c in self.sim.clusters if c not in self.faulted]
        c = self.rng.choice(clusters)
        bindings = [
            b for b in self.sim.list(c, "RoleBinding") if b["metadata"]["name"] == "team-view"
        ]
        b = self.rng.choice(bindings)
        ns = b["metadata"]["namespace"]
        group = next(s["name"] for s in b["subjects"] if s["kind"] == "Group")
        h, path = headers(f"dev-{group}", (group,)), f"/api/v1/objects?cluster={c}&namespace={ns}"
        rec: dict[str, Any] = {"at_s": round(self.record.now_s(), 1), "cluster": c, "ns": ns}
        t0 = time.monotonic()
        self.sim.delete(c, "RoleBinding", ns, "team-view")
        rec["revoked_s"] = self._until_gone(h, path, t0)
        rec["seen_after_bound"] = self._watch_gone(h, path, self.every_s)
        if not self.stop_event.is_set():  # one cut short by the run's end measured nothing
            self.record.revocations.append(rec)
        restored = {k: v for k, v in b.items() if k != "status"}
        restored["metadata"] = {"name": "team-view", "namespace": ns}
        if "labels" in b["metadata"]:
            restored["metadata"]["labels"] = b["metadata"]["labels"]
        self.sim.apply(c, restored)

    def _until_gone(self, h: dict[str, str], path: str, t0: float) -> float | None:
        while time.monotonic() - t0 < 60 and not self.stop_event.is_set():
            code, body = http_json(self.bases[0] + path, h)
            if code == 200 and not body["items"]:
                return round(time.monotonic() - t0, 3)
            time.sleep(POLL_S)
        return None

    def _watch_gone(self, h: dict[str, str], path: str, seconds: float) -> int:
        """Answers after the bound that still show the revoked namespace's rows."""
        seen, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds and not self.stop_event.is_set():
            for base in self.bases:
                code, body = http_json(base + path, h)
                seen += code == 200 and bool(body["items"])
            self.stop_event.wait(1)
        return seen


class Streams(Looping):
    """One watch stream per caller, resumed from its last event id when it ends."""

    def __init__(self, record: Record, base: str, who: str, h: dict[str, str]) -> None:
        super().__init__(record, f"stream-{who}")
        self.host, self.h, self.who, self.last = base.removeprefix("http://"), h, who, ""

    def step(self) -> None:
        if not self.last:
            code, body = http_json(f"http://{self.host}/api/v1/objects?limit=1", self.h)
            if code != 200:
                self.record.streams[f"{self.who} list {code}"] += 1
                self.stop_event.wait(1)
                return
            self.last = body["resourceVersion"]
        rv = urllib.parse.quote(self.last)
        stream = Stream(self.host, f"/api/v1/watch?resourceVersion={rv}&timeoutSeconds=120", self.h)
        if stream.status != 200:
            self.record.streams[f"{self.who} status {stream.status}"] += 1
            stream.close()
            self.stop_event.wait(1)
            return
        self.record.streams["connects"] += 1
        try:
            while not self.stop_event.is_set():
                kind, eid, _data = stream.next()
                self.record.streams[f"event {kind}"] += 1
                if kind == "ERROR":
                    self.last = ""  # expired: list again
                    return
                if eid:
                    self.last = eid
        except (EOFError, OSError, ValueError):
            self.record.streams["ended, resumed"] += 1
        finally:
            stream.close()


class Walks(Looping):
    """Every `every_s`, one caller's walk (limit 500, continue tokens to the end), rotating."""

    def __init__(self, record: Record, bases: list[str], every_s: float) -> None:
        super().__init__(record, "walks")
        self.bases, self.every_s, self.n = bases, every_s, 0
        self.who = ["team-00", "wide", "team-01"]

    def step(self) -> None:
        self.stop_event.wait(self.every_s)
        who = self.who[self.n % len(self.who)]
        base = self.bases[self.n % len(self.bases)]
        self.n += 1
        at = round(self.record.now_s(), 1)
        hidden: set[str] = set()
        rows, code = walk(self.record, base, CALLERS[who], hidden)
        self.record.walks.append(
            {
                "at_s": at,
                "user": who,
                "rows": len(rows),
                "distinct": len(set(rows)),
                "code": code,
                "hidden_stale_rbac": sorted(hidden),
            }
        )


def walk(
    record: Record | None, base: str, h: dict[str, str], hidden: set[str] | None = None
) -> tuple[list[tuple[str, ...]], int]:
    """Every row a caller lists (cluster, namespace, kind, name), and the last page's status;
    `hidden` gets the clusters a page said it hid for stale RBAC (`hiddenStaleRbac`)."""
    out: list[tuple[str, ...]] = []
    token = ""
    while True:
        more = "&continue=" + urllib.parse.quote(token) if token else ""
        path = "/api/v1/objects?limit=500" + more
        code, page = record.get(base, path, h, "walk") if record else http_json(base + path, h)
        if code != 200:
            return out, code
        out += [(r["cluster"], r["namespace"], r["kind"], r["name"]) for r in page["items"]]
        if hidden is not None:
            stale = (page.get("freshness") or {}).get("hiddenStaleRbac") or []
            hidden.update(x["cluster"] for x in stale)
        token = page["continue"] or ""
        if not token:
            return out, code
