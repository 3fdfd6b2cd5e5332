"""`fleetscope kubesim`: serve simulated leaf clusters and write one kubeconfig per cluster.

fleetscope kubesim --preset S --kubeconfig-dir ./clusters
fleetscope kubesim --clusters 3 --namespaces 20 --seed 7 --port 16443
fleetscope kubesim --from ./manifests --kubeconfig-dir ./clusters
fleetscope kubesim --preset S --register-with gitopscluster   # plus a management cluster
fleetscope kubesim --from kubesim/examples/management-fleet --management-cluster management
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from common.errors import ConfigError
from common.index.keys import valid_cluster_name
from kubesim.gen.fleet import PRESETS, generate_fleet
from kubesim.gen.users import write_users
from kubesim.manifests import ManifestFleet
from kubesim.registration import MANAGEMENT, SOURCES, ManagementFleet
from kubesim.server import KubeSim


def configure(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", choices=sorted(PRESETS), help="S=10x100, M=50x500, L=200x2000, XL=1000x2000"
    )
    src.add_argument("--from", dest="from_dir", metavar="DIR", help="serve DIR/<cluster>/*.yaml")
    parser.add_argument("--clusters", type=int, help="generated clusters (default 2)")
    parser.add_argument("--namespaces", type=int, help="app namespaces per cluster (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated fleet")
    parser.add_argument(
        "--kubeconfig-dir", default="kubesim-clusters", help="where to write <cluster>.yaml"
    )
    parser.add_argument(
        "--users-file",
        help="where to write the generated users and their access "
        "(default: kubesim-users.json next to the kubeconfig dir)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address")
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="base port: cluster i on PORT+i (default 0: a free port per cluster, from the OS)",
    )
    parser.add_argument("--advertise-host", default="", help="host written into kubeconfigs")
    parser.add_argument(
        "--warm", action="store_true", help="generate every cluster before the ready line"
    )
    parser.add_argument(
        "--no-tls", action="store_true", help="plain HTTP (kubectl then sends no token)"
    )
    parser.add_argument(
        "--register-with",
        choices=SOURCES,
        help=f"also serve a cluster {MANAGEMENT!r} that registers the fleet through this "
        "source of fleetscope's cluster registry",
    )
    parser.add_argument(
        "--management-cluster",
        metavar="NAME",
        help="the served cluster NAME plays the management cluster (with --from)",
    )
    parser.add_argument(
        "--management-kubeconfig",
        metavar="FILE",
        help="where to write the management cluster's kubeconfig "
        "(default: kubesim-management.yaml next to the kubeconfig dir)",
    )


def build_fleet(args: argparse.Namespace) -> tuple[object, bool]:
    """The fleet to serve and whether it is generated."""
    if args.from_dir:
        if args.clusters or args.namespaces:
            raise ConfigError("--from serves manifests: drop --clusters/--namespaces")
        return ManifestFleet(args.from_dir), False
    clusters, namespaces = PRESETS[args.preset] if args.preset else (2, 5)
    clusters = args.clusters or clusters
    namespaces = args.namespaces or namespaces
    if clusters < 1 or namespaces < 1:
        raise ConfigError("--clusters and --namespaces must be at least 1")
    return generate_fleet(clusters, namespaces, args.seed), True


def _serve_management(sim: KubeSim, args: argparse.Namespace, kube_dir: Path) -> str:
    """Load the management cluster now (a Secret naming an unknown cluster fails here, not on
    the first request) and write its kubeconfig beside the leaves' directory."""
    try:
        sim.warm_cluster(sim.management)
        path = args.management_kubeconfig or kube_dir.resolve().parent / "kubesim-management.yaml"
        written = sim.write_management_kubeconfig(path)
    except BaseException:
        sim.stop()
        raise
    return f"; management cluster {sim.management}: kubeconfig {written}"


def ports_text(ports: list[int]) -> str:
    """`ports 7000-7009` for a base port; OS-picked ports are listed (the first few)."""
    if ports == list(range(ports[0], ports[0] + len(ports))):
        return f"ports {ports[0]}-{ports[-1]}" if len(ports) > 1 else f"port {ports[0]}"
    shown = ", ".join(str(p) for p in ports[:5])
    return f"ports {shown}" + (f", ... ({len(ports)} in all)" if len(ports) > 5 else "")


def run(args: argparse.Namespace) -> int:
    fleet, generated = build_fleet(args)
    leaves = fleet
    if args.register_with:
        fleet = ManagementFleet(fleet, args.register_with)
    bad = [n for n in fleet.cluster_names if not valid_cluster_name(n)]  # type: ignore[attr-defined]
    if bad:
        raise ConfigError(f"cluster names must be lower-case DNS-like names: {bad[:5]}")
    kube_dir = Path(args.kubeconfig_dir)
    sim = KubeSim.start(
        fleet,  # type: ignore[arg-type]
        kubeconfig_dir=kube_dir,
        host=args.host,
        port=args.port,
        advertise_host=args.advertise_host,
        tls=not args.no_tls,
        management=args.management_cluster or "",
    )
    if args.warm:
        sim.warm()
    users_note = ""
    if generated:
        users = Path(args.users_file or kube_dir.resolve().parent / "kubesim-users.json")
        write_users(leaves, users)  # type: ignore[arg-type]
        users_note = f"; users in {users}"
    if sim.management:
        users_note += _serve_management(sim, args, kube_dir)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    ports = [sim.port(c) for c in sim.clusters]
    print(
        f"kubesim ready: {len(ports)} clusters on {args.host} {ports_text(ports)}; "
        f"kubeconfigs in {kube_dir}{users_note}",
        flush=True,
    )
    sim.serve_forever(stop)
    print("kubesim stopped", file=sys.stderr)
    return 0
