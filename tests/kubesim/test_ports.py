"""kubesim's ports: each cluster on a port the OS picks (no run of consecutive free ports is
assumed), kubeconfigs carry the ports actually bound, an explicit base port already in use fails
naming it, and a cluster that is "down" keeps its port so it comes back on the same one."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import requests
import yaml

from common.errors import ConfigError
from kubesim.cli import ports_text
from kubesim.gen.fleet import generate_fleet
from tests.support import sims
from tests.support.portpressure import bind_fails, ephemeral_ports_held


def _server(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def test_many_clusters_start_while_thousands_of_ports_are_held(tmp_path: Path) -> None:
    fleet = generate_fleet(clusters=12, namespaces=1, seed=1)
    with ephemeral_ports_held(6000) as held:
        assert all(bind_fails(p) for p in held[:50]), "the pressure is real"
        with sims.start(fleet, tmp_path, tls=False) as sim:
            ports = [sim.port(c) for c in sim.clusters]
            assert len(set(ports)) == 12 and not set(ports) & set(held)
            for c in sim.clusters:
                assert _server(sim.kubeconfig_path(c)) == f"http://127.0.0.1:{sim.port(c)}"
                assert requests.get(sim.url(c) + "/version", timeout=5).status_code == 401


def test_an_explicit_port_in_use_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fleet = generate_fleet(clusters=1, namespaces=1, seed=1)
        with pytest.raises(ConfigError, match=rf"127\.0\.0\.1:{port} for cluster cluster-000"):
            sims.start(fleet, tmp_path, port=port, tls=False)


def test_a_down_cluster_keeps_its_port(tmp_path: Path) -> None:
    fleet = generate_fleet(clusters=1, namespaces=1, seed=1)
    with sims.start(fleet, tmp_path, tls=False) as sim:
        port = sim.port("cluster-000")
        sim.set_fault("cluster-000", down=True)
        # Still bound (not listening): no client's connect() gets it as an ephemeral port and a
        # plain bind fails, so the cluster can come back on the port its kubeconfig names.
        assert bind_fails(port, reuse_address=False)
        with pytest.raises(requests.ConnectionError):
            requests.get(sim.url("cluster-000") + "/version", timeout=5)
        sim.set_fault("cluster-000")
        assert sim.port("cluster-000") == port
        assert requests.get(sim.url("cluster-000") + "/version", timeout=5).status_code == 401
    assert not bind_fails(port), "stop() gives the port back"


def test_ready_line_lists_os_picked_ports_and_ranges_base_ports() -> None:
    assert ports_text([7000, 7001, 7002]) == "ports 7000-7002"
    assert ports_text([41234, 38211]) == "ports 41234, 38211"
    assert ports_text(list(range(40000, 40020, 2))).endswith(", ... (10 in all)")
