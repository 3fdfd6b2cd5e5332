"""`fleetscope demo` as a user runs it: a subprocess that reaches `ready` on a busy machine
(thousands of ephemeral ports held), whose printed requests show RBAC filtering for different
users, and that leaves no process behind after Ctrl-C; a taken `--port` is said in plain words."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.portpressure import bind_fails, ephemeral_ports_held
from tests.support.waiting import wait_for


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid`, including those that started their own session."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class DemoRun:
    def __init__(self, tmp: Path, port: int = 0) -> None:
        self.out_path = tmp / "demo.out"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fleetscope",
                    "demo",
                    "--port",
                    str(port),
                    "--workdir",
                    str(tmp / "work"),
                    "--ready-timeout",
                    "240",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def printed(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """The first match of `pattern` in the demo's output, once printed."""

        def found() -> re.Match[str] | None:
            match = re.search(pattern, self.output())
            assert match or self.proc.poll() is None, f"demo exited early:\n{self.output()}"
            return match

        return wait_for(found, timeout_s, lambda: f"{pattern!r}:\n{self.output()}", 0.2)


@pytest.fixture
def busy_machine() -> Iterator[list[int]]:
    """Thousands of ephemeral ports held, as on a machine that has been busy for an hour."""
    with ephemeral_ports_held(6000) as ports:
        assert len(ports) >= 2000 and all(bind_fails(p) for p in ports[:50])
        yield ports


@pytest.fixture
def demo(tmp_path: Path, busy_machine: list[int]) -> Iterator[DemoRun]:
    # A kept --workdir: what the last run logged must not be read as this run's.
    logs = tmp_path / "work" / "logs"
    logs.mkdir(parents=True)
    (logs / "kubesim.log").write_text("kubesim ready: 10 clusters on 127.0.0.1 ports 1-10\n")
    (logs / "query.log").write_text("[INFO] Listening at: http://127.0.0.1:1 (1)\n")
    run = DemoRun(tmp_path)  # --port 0: the API on a port the OS picks
    yield run
    if run.proc.poll() is None:
        for pid in _descendants(run.proc.pid):
            os.kill(pid, signal.SIGKILL)
        run.proc.kill()
        run.proc.wait()


def _printed_requests(output: str) -> dict[str, tuple[dict[str, list[str]], str]]:
    """The `# description` + `curl ...` pairs of the banner, by user name."""
    requests: dict[str, tuple[dict[str, list[str]], str]] = {}
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("curl ") or "X-Remote-User" not in line:
            continue
        if "/api/v1/objects" not in line:
            assert "/api/v1/status" in line, line  # the status line, as the first user
            continue
        words = shlex.split(line)
        headers: dict[str, list[str]] = {}
        for flag, value in itertools.pairwise(words):
            if flag == "-H":
                name, _, v = value.partition(": ")
                headers.setdefault(name, []).append(v)
        requests[headers["X-Remote-User"][0]] = (headers, words[-1])
    return requests


def _get(url: str, headers: dict[str, list[str]]) -> dict[str, Any]:
    req = urllib.request.Request(url)
    for name, values in headers.items():
        req.add_header(name, ", ".join(values))
    with urllib.request.urlopen(req, timeout=10) as resp:
        body: dict[str, Any] = json.loads(resp.read())
        return body


def test_demo_shows_rbac_filtering_and_stops_cleanly(demo: DemoRun) -> None:
    demo.printed(r"\] ready\.", timeout_s=240)
    requests = _printed_requests(demo.output())
    assert {"admin-0", "dev-team-00", "nobody"} <= set(requests)
    users = json.loads((demo.out_path.parent / "work" / "kubesim-users.json").read_text())
    access = {u["name"]: u["access"] for u in users["users"]}

    def ask(user: str) -> dict[str, Any]:
        headers, url = requests[user]
        return _get(url, headers)

    admin = ask("admin-0")
    assert len(admin["items"]) == 5 and admin["continue"]
    team = ask("dev-team-00")
    assert team["items"], "a team member sees their namespaces"
    for row in team["items"]:
        assert row["namespace"] in access["dev-team-00"][row["cluster"]]
    nobody = ask("nobody")
    assert nobody["items"] == [] and nobody["continue"] is None
    assert {r["namespace"] for r in admin["items"]} != {r["namespace"] for r in team["items"]}

    # The demo's fleet shows failing Istio, Gateway API and Kuadrant rows that say what is wrong.
    headers, url = requests["admin-0"]
    base = url.split("/api/v1/")[0]
    families = {
        "Istio": "VirtualService,DestinationRule,Sidecar",
        "Gateway API": "K8sGateway,HTTPRoute",
        "Kuadrant": "AuthPolicy,RateLimitPolicy,DNSPolicy,TLSPolicy",
    }
    for family, kinds in families.items():
        url = f"{base}/api/v1/objects?status=unhealthy&kind={kinds}&limit=50"
        # Polled: once in CI (at the dependency floors, a loaded machine) the first answer after
        # `ready` held none; the cause is not found yet (noted on issue #18).
        failing = wait_for(
            lambda url=url: (body := _get(url, headers))["items"] and body,
            60,
            f"an unhealthy {family} row in the demo",
            interval_s=0.2,
        )
        assert all(r["message"] and r["reason"] for r in failing["items"]), family
    istio = _get(f"{base}/api/v1/objects?status=unhealthy&kind=VirtualService&limit=50", headers)
    assert any(r["reason"].startswith("KIA") for r in istio["items"]), "fleetscope's own checks"

    # ... and root causes: a failing Kustomization blocked by its source, whose relations say so.
    ks = _get(f"{base}/api/v1/objects?status=unhealthy&kind=Kustomization&limit=500", headers)
    blocked = [r for r in ks["items"] if "blockedBy" in r]
    assert blocked, "no failing Kustomization with a root cause in the demo"
    row, cause = blocked[0], blocked[0]["blockedBy"]
    path = "/".join(row[k] or "_" for k in ("cluster", "namespace", "kind", "name"))
    rel = _get(f"{base}/api/v1/objects/{path}/relations?depth=5", headers)
    assert any(
        (e["namespace"], e["kind"], e["name"], e["exists"])
        == (cause["namespace"], cause["kind"], cause["name"], cause["exists"])
        for e in rel["upstream"]
    ), "the cause is upstream of the row"

    # The demo's alert rules run without an Alertmanager: firing alerts at /api/v1/alerts.
    seen: dict[str, Any] = {}

    def firing() -> dict[str, Any] | None:
        seen.update(_get(f"{base}/api/v1/alerts", headers))
        return seen if seen["items"] else None

    alerts = wait_for(firing, 90, lambda: f"a firing alert in the demo: {seen.get('rules')}", 0.5)
    assert alerts["rules"]["count"] == 3 and alerts["rules"]["error"] is None
    assert {a["rule"] for a in alerts["items"]} >= {"FluxKustomizationFailing"}

    children = _descendants(demo.proc.pid)
    assert len(children) >= 5  # redis, kubesim, worker, beat, query (+ their forks)
    demo.proc.send_signal(signal.SIGINT)
    assert demo.proc.wait(60) == 0
    wait_for(
        lambda: not any(_alive(p) for p in children),
        10,
        lambda: f"the demo's children to exit: {[p for p in children if _alive(p)]}",
    )
    assert "stopped" in demo.output()
    logs = demo.out_path.parent / "work" / "logs"
    assert "127.0.0.1:1 " in (logs / "query.log.1").read_text(), "the last run's log, kept"


def test_a_taken_port_is_said_plainly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = DemoRun(tmp_path, port=port)
        assert run.proc.wait(60) == 2
    out = run.output()
    assert f"port {port} on 127.0.0.1 is in use" in out
    assert "--port 0" in out and "Traceback" not in out
