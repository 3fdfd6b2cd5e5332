"""`fleetscope demo`: the whole stack on one machine, for a first look.

A private redis-server (unless FLEETSCOPE_REDIS_URL is set), a kubesim fleet, a Celery worker and
beat, and the query API with `header` identity trusting loopback. Prints the URL and requests to
paste for a few generated users, follows the rebuild until `ready`, and stops every child on
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.redis_server import RedisServer, start_redis_server
from common.redis_urls import redact
from fleetscope.demo_users import DemoUser, pick_demo_users
from fleetscope.supervisor import Child, Supervisor, python_module
from query.cli import listening_port


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, default=8080, help="query API port (default 8080; 0 = any free port)"
    )
    parser.add_argument("--preset", default="S", choices=["S", "M", "L"], help="fleet size")
    parser.add_argument("--seed", type=int, default=1, help="fleet generator seed")
    parser.add_argument("--workdir", help="keep kubeconfigs and logs here (default: a temp dir)")
    parser.add_argument(
        "--ready-timeout", type=float, default=120.0, help="seconds to wait for `ready`"
    )
    parser.add_argument(
        "--registry",
        default="dir",
        choices=sorted(REGISTRY_SWITCHES),
        help="how the fleet is registered: a kubeconfig directory (default), or a simulated "
        "management cluster's GitopsClusters, Cluster API Clusters, Argo CD or fleetscope Secrets",
    )


def run(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fleetscope-demo-"))
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    _rotate_logs(workdir / "logs")
    _check_port_free(args.port)
    stop = _install_signal_handlers()
    redis_server: RedisServer | None = None
    redis_url = os.environ.get("FLEETSCOPE_REDIS_URL", "")
    if not redis_url:
        redis_server = start_redis_server()
        redis_url = redis_server.url
    sup = Supervisor(workdir / "logs", _child_env(redis_url, workdir, args.port))
    try:
        return _run_stack(args, workdir, sup, redis_url, stop)
    finally:
        print("\nstopping: query, beat, worker, kubesim" + (", redis" if redis_server else ""))
        sup.stop_all()
        if redis_server:
            redis_server.stop()
        print("stopped; logs were in", workdir / "logs")


def _run_stack(
    args: argparse.Namespace, workdir: Path, sup: Supervisor, redis_url: str, stop: list[int]
) -> int:
    kubeconfigs = workdir / "clusters"
    registry_args, registry_env = registry_setup(args.registry, workdir)
    sup.env.update(registry_env)
    say(f"fleetscope demo: Redis at {redact(redis_url)}; files in {workdir}")
    say(f"starting kubesim (fleet {args.preset}, seed {args.seed})")
    sup.start(
        "kubesim",
        python_module(
            "fleetscope",
            "kubesim",
            "--preset",
            args.preset,
            "--seed",
            str(args.seed),
            "--kubeconfig-dir",
            str(kubeconfigs),
            "--host",
            "127.0.0.1",
            *registry_args,
        ),
    )
    _wait(lambda: _ready_line(sup, "kubesim"), 120, sup, stop, "kubesim to serve its fleet")
    clusters = sorted(p.stem for p in kubeconfigs.glob("*.yaml"))
    say(f"kubesim serves {len(clusters)} clusters; starting Celery worker and beat")
    sup.start(
        "worker",
        python_module(
            "celery", "-A", "collector", "worker", "--loglevel", "INFO", "--concurrency", "2"
        ),
    )
    sup.start(
        "beat",
        python_module(
            "celery",
            "-A",
            "collector",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(workdir / "beat-schedule"),
        ),
    )
    sup.start("query", python_module("fleetscope", "serve", "--bind", f"127.0.0.1:{args.port}"))
    port = _wait(lambda: _query_port(sup, args.port), 60, sup, stop, "the query API to listen")
    base = f"http://127.0.0.1:{port}"
    _wait(lambda: _get(base + "/readyz") is not None, 60, sup, stop, "the query API")
    _print_banner(base, pick_demo_users(kubeconfigs))
    if not _follow_status(base, args.ready_timeout, sup, stop):
        return 1
    say("ready. Ctrl-C stops everything.")
    while not stop:
        _check_children(sup)
        time.sleep(0.5)
    return 0


REGISTRY_SWITCHES = {
    "dir": "",
    "gitopscluster": "FLEETSCOPE_GITOPSCLUSTERS",
    "capi": "FLEETSCOPE_CAPI_CLUSTERS",
    "argocd": "FLEETSCOPE_ARGOCD_CLUSTERS",
    "secret": "FLEETSCOPE_CLUSTER_SECRETS",
}


def registry_setup(registry: str, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """kubesim arguments and settings that register the demo fleet through `registry`: the
    kubeconfig directory, or one source on a management cluster kubesim simulates (its objects
    name the clusters as kubesim does, so the demo users' access still applies)."""
    if registry == "dir":
        return [], {}
    kubeconfig = workdir / "management.yaml"
    args = ["--register-with", registry, "--management-kubeconfig", str(kubeconfig)]
    env = {
        "FLEETSCOPE_CLUSTERS_DIR": "",
        "FLEETSCOPE_MANAGEMENT_KUBECONFIG": str(kubeconfig),
        REGISTRY_SWITCHES[registry]: "true",
        "FLEETSCOPE_UI_DEMO_USERS_FILE": str(workdir / "kubesim-users.json"),
        # kubesim's management cluster registers in these namespaces, and names each cluster
        # with the label fleetscope.io/cluster-name (honoured only where allowed)
        "FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE": "fleet",
        "FLEETSCOPE_CAPI_CLUSTERS_NAMESPACE": "fleet",
        "FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES": "fleet,argocd,fleetscope",
    }
    return args, env


DEMO_ALERT_RULES = """\
# The demo's fleet alert rules (docs/operations.md, Alerting). Without an Alertmanager
# (FLEETSCOPE_ALERTMANAGER_URL) they are still evaluated: GET /api/v1/alerts, `fleetscope alerts`.
rules:
  - name: FluxKustomizationFailing
    match: {kind: Kustomization, status: unhealthy, suspended: false}
    severity: warning
    labels: {team: "{{ .namespace }}"}
    annotations:
      summary: "Kustomization {{ .namespace }}/{{ .name }} on {{ .cluster }}: {{ .reason }}"
  - name: FluxHelmReleaseFailingOnManyClusters
    match: {kind: HelmRelease, status: unhealthy}
    minClusters: 2
    severity: critical
    annotations:
      summary: "HelmRelease {{ .namespace }}/{{ .name }} fails on {{ .clusters }} clusters"
  - name: IstioConfigInvalid
    match: {kind: [VirtualService, DestinationRule, Gateway], status: unhealthy}
    for: 5m
    annotations:
      summary: "{{ .kind }} {{ .namespace }}/{{ .name }} on {{ .cluster }}: {{ .message }}"
"""


def _child_env(redis_url: str, workdir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    env.update(
        FLEETSCOPE_REDIS_URL=redis_url,
        FLEETSCOPE_CLUSTERS_DIR=str(workdir / "clusters"),
        FLEETSCOPE_AUTH_MODE="header",
        FLEETSCOPE_TRUSTED_PROXY_CIDRS="127.0.0.1/32,::1/128",
        # Only the loopback names: a page whose DNS name rebinds to 127.0.0.1 is refused.
        FLEETSCOPE_ALLOWED_HOSTS="localhost,127.0.0.1,::1",
        # The web view's user switcher joins groups into one header (fetch cannot repeat one).
        FLEETSCOPE_HEADER_GROUP_SEPARATOR=",",
        FLEETSCOPE_BIND=f"127.0.0.1:{port}",
        FLEETSCOPE_UI_DEMO_MODE="true",
        FLEETSCOPE_SYNC_INTERVAL_S="30",
        FLEETSCOPE_RBAC_SYNC_INTERVAL_S="15",
        FLEETSCOPE_REGISTRY_INTERVAL_S="10",
        FLEETSCOPE_WORKER_METRICS_PORT="0",
        FLEETSCOPE_METRICS_DIR=str(workdir / "metrics"),
        FLEETSCOPE_ALERT_RULES_FILE=str(workdir / "alert-rules.yaml"),
        FLEETSCOPE_ALERT_INTERVAL_S="15",
        PYTHONUNBUFFERED="1",
    )
    (workdir / "alert-rules.yaml").write_text(DEMO_ALERT_RULES)
    for passed in ("FLEETSCOPE_ALERTMANAGER_URL", "FLEETSCOPE_ALERT_RULES_FILE"):
        if os.environ.get(passed):  # your Alertmanager, or your own rules
            env[passed] = os.environ[passed]
    if os.environ.get("FLEETSCOPE_BROKER_URL"):  # beside a FLEETSCOPE_REDIS_URL of your own
        env["FLEETSCOPE_BROKER_URL"] = os.environ["FLEETSCOPE_BROKER_URL"]
    (workdir / "metrics").mkdir(exist_ok=True)
    return env


def _print_banner(base: str, users: list[DemoUser]) -> None:
    print(f"\n  fleetscope is up: {base}/   (status: {base}/api/v1/status)\n")
    print("  Try these (identity comes from trusted headers in demo mode; the command-line")
    print("  client sends them with --as/--as-group, see docs/cli.md):\n")
    for user in users:
        print(f"  # {user.description}")
        print(f"  {user.curl(base + '/api/v1/objects?limit=5')}")
        print(f"  {user.fleetscope('get', base, '--limit', '5')}\n")
    if users:  # the status, as the first user (every API call needs an identity)
        print(f"  {users[0].curl(base + '/api/v1/status')}")
        print(f"  {users[0].fleetscope('status', base)}")
        print(f"  {users[0].fleetscope('alerts', base)}   # fleet alerts (demo rules)")
    print()
    sys.stdout.flush()


def _follow_status(base: str, timeout_s: float, sup: Supervisor, stop: list[int]) -> bool:
    deadline, last = time.monotonic() + timeout_s, ""
    while not stop and time.monotonic() < deadline:
        _check_children(sup)
        status = _get(base + "/api/v1/status")
        if status:
            line = f"{status.get('state')}: {status.get('message', '')}"
            if line != last:
                say(line)
                last = line
            if status.get("state") == "ready":
                return True
        time.sleep(0.5)
    if not stop:
        say(f"not ready after {timeout_s:.0f} s; see the logs in {sup.log_dir}")
    return bool(stop)


def _get(url: str) -> dict[str, Any] | None:
    req = urllib.request.Request(url, headers={"X-Remote-User": "fleetscope-demo"})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            body = json.loads(resp.read())
            return body if isinstance(body, dict) else {}
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _rotate_logs(log_dir: Path) -> None:
    """A kept --workdir: the previous run's logs become `*.log.1`, so that what this run reads
    back from its children's logs (ready lines, gunicorn's port) is this run's."""
    for log in log_dir.glob("*.log"):
        log.replace(log.with_name(log.name + ".1"))


def _child(sup: Supervisor, name: str) -> Child:
    return next(c for c in sup.children if c.name == name)


def _ready_line(sup: Supervisor, name: str) -> bool:
    return "ready" in _child(sup, name).tail(50).lower()


def _query_port(sup: Supervisor, asked: int) -> int | None:
    """The port gunicorn listens on, from its log (`--port 0`: the one the OS picked)."""
    log = _child(sup, "query").tail(200)
    if "Connection in use" in log:  # gunicorn's words for EADDRINUSE; it would retry 5 s
        raise ConfigError(_port_in_use(asked))
    return listening_port(log)


def _wait(cond: Any, timeout_s: float, sup: Supervisor, stop: list[int], what: str) -> Any:
    """Poll `cond` until it returns something truthy (returned), a child dies, or Ctrl-C."""
    deadline = time.monotonic() + timeout_s
    while not (value := cond()):
        _check_children(sup)
        if stop:
            raise KeyboardInterrupt
        if time.monotonic() > deadline:
            raise ConfigError(f"timed out waiting for {what}; logs in {sup.log_dir}")
        time.sleep(0.2)
    return value


def _check_children(sup: Supervisor) -> None:
    for child in sup.dead():
        raise ConfigError(
            f"{child.name} exited with status {child.process.returncode}; last lines of "
            f"{child.log_path}:\n{child.tail()}"
        )


def _check_port_free(port: int) -> None:
    """Fail early, in plain words, when something already listens on the API port.

    SO_REUSEADDR as gunicorn sets it: connections of an earlier run still in TIME_WAIT on the
    port do not stop gunicorn from listening there, so they must not stop the demo either."""
    if port == 0:
        return
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise ConfigError(_port_in_use(port)) from e


def _port_in_use(port: int) -> str:
    return (
        f"port {port} on 127.0.0.1 is in use (another fleetscope demo?); choose another with "
        "--port, or --port 0 for any free port"
    )


def _install_signal_handlers() -> list[int]:
    """SIGINT and SIGTERM append to the returned list; loops check it and unwind cleanly."""
    stop: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        stop.append(signum)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
