"""common.leaf.client against a small local HTTP API server: kubeconfig loading (token, exec plugin),
discovery, paginated lists with 410 restarts, impersonated GETs, error translation, and no
credentials in reprs, errors or logs."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import Configuration

from common.errors import ClusterError, ClusterUnreachable, Forbidden, NotFound, UpstreamError
from common.kinds.registry import builtin_registry
from common.leaf.client import ClusterConfig, LeafClient, page_items
from tests.support.fakeleaf import KS, FakeLeaf, flux_object

TOKEN = "tok-SECRET-d1st1nct1ve-4242"


@pytest.fixture
def leaf() -> Iterator[FakeLeaf]:
    fake = FakeLeaf(token=TOKEN).start()
    for i in range(7):
        fake.add(KS, "kustomizations", flux_object(f"ns-{i}", f"app-{i}"))
    fake.add("source.toolkit.fluxcd.io/v1", "gitrepositories", flux_object("ns-0", "repo"))
    fake.add("networking.istio.io/v1beta1", "virtualservices", flux_object("ns-0", "vs"))
    yield fake
    fake.stop()


def client(leaf: FakeLeaf, page_size: int = 3, **kw: object) -> LeafClient:
    cfg = ClusterConfig("leaf", "dir", "/tmp/leaf.yaml", leaf.kubeconfig(**kw))  # type: ignore[arg-type]
    return LeafClient(cfg, timeout_s=5, page_size=page_size)


def test_discovery_picks_served_kinds_and_versions(leaf: FakeLeaf) -> None:
    c = client(leaf)
    served = c.discover(builtin_registry())
    assert served == {
        "Kustomization": KS,
        "GitRepository": "source.toolkit.fluxcd.io/v1",
        "VirtualService": "networking.istio.io/v1beta1",
    }
    # /apis plus one resource list per served group-version: never per kind or namespace
    assert c.requests == 4


def test_list_paginates_with_limit_and_continue(leaf: FakeLeaf) -> None:
    c = client(leaf, page_size=3)
    kind = builtin_registry().get("Kustomization")
    assert kind is not None
    names = [o["metadata"]["name"] for o in c.list_all(kind, KS)]
    assert names == [f"app-{i}" for i in range(7)]
    assert c.requests == 3  # 7 objects, pages of 3
    paths = [p for p, _ in leaf.requests]
    assert paths[0].endswith("kustomizations?limit=3")
    assert "continue=3" in paths[1]


def test_list_restarts_from_scratch_on_410(leaf: FakeLeaf) -> None:
    leaf.expire_continue = 1
    c = client(leaf, page_size=3)
    items = list(c.list_resource(KS, "kustomizations"))
    assert [o["metadata"]["name"] for o in items] == [f"app-{i}" for i in range(7)]
    assert c.requests == 2 + 3  # first attempt died on its second page


def test_list_pages_keep_each_page_whole_and_restart_from_scratch_on_410(leaf: FakeLeaf) -> None:
    leaf.expire_continue = 1
    c = client(leaf, page_size=3)
    bodies, read = c.list_pages(KS, "kustomizations", lambda items: len(items))
    assert c.requests == 2 + 3  # first attempt died on its second page
    assert read == [3, 3, 1]  # what the dead attempt read is not handed on
    assert all(isinstance(b, bytes) for b in bodies)
    names = [o["metadata"]["name"] for b in bodies for o in page_items(b)]
    assert names == [f"app-{i}" for i in range(7)]


def test_list_read_hands_on_what_each_page_made_and_the_lists_version(leaf: FakeLeaf) -> None:
    leaf.expire_continue = 1
    c = client(leaf, page_size=3)
    read, rv = c.list_read(
        KS, "kustomizations", lambda items: [o["metadata"]["name"] for o in items]
    )
    assert c.requests == 2 + 3  # first attempt died on its second page: nothing of it kept
    assert read == [["app-0", "app-1", "app-2"], ["app-3", "app-4", "app-5"], ["app-6"]]
    assert rv == c.list_snapshot(KS, "kustomizations")[1]  # the last page's (kubesim: tests/watch)


def test_errors_are_translated(leaf: FakeLeaf) -> None:
    leaf.fail_status = 503
    with pytest.raises(ClusterUnreachable):
        client(leaf).discover(builtin_registry())
    leaf.fail_status = 0
    with pytest.raises(ClusterError, match="HTTP 401"):
        client(leaf, token="wrong").discover(builtin_registry())


def test_unreachable_cluster() -> None:
    cfg = ClusterConfig(
        "gone",
        "dir",
        "x",
        {
            "current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": TOKEN}}],
        },
    )
    with pytest.raises(ClusterUnreachable):
        LeafClient(cfg, timeout_s=2).discover(builtin_registry())


def test_get_object_impersonates_and_translates(leaf: FakeLeaf) -> None:
    c = client(leaf)
    kind = builtin_registry().get("Kustomization")
    assert kind is not None
    obj = c.get_object(kind, KS, "ns-2", "app-2", "alice", ["team-a", "system:authenticated"])
    assert obj["metadata"]["name"] == "app-2"
    _, headers = leaf.requests[-1]
    assert headers["impersonate-user"] == ["alice"]
    assert headers["impersonate-group"] == ["team-a", "system:authenticated"]
    with pytest.raises(NotFound):
        c.get_object(kind, KS, "ns-2", "missing", "alice")
    leaf.fail_status = 403
    with pytest.raises(Forbidden):
        c.get_object(kind, KS, "ns-2", "app-2", "bob")
    leaf.fail_status = 500
    with pytest.raises(UpstreamError):
        c.get_object(kind, KS, "ns-2", "app-2", "bob")


def test_a_token_kubeconfig_sends_its_authorization_header(leaf: FakeLeaf) -> None:
    """With the installed kubernetes client (and, in .ci/lowest, the oldest one allowed)."""
    client(leaf).discover(builtin_registry())
    assert leaf.requests
    assert all(h.get("authorization") == [f"Bearer {TOKEN}"] for _, h in leaf.requests)


@pytest.mark.parametrize("key", ["BearerToken", "authorization"])
def test_token_is_found_where_any_client_version_stores_it(leaf: FakeLeaf, key: str) -> None:
    """The loader keeps it under `authorization` up to kubernetes 36.0.0 and under
    `BearerToken` from 36.0.1 on; both must end up in the Authorization header."""
    configuration = Configuration()
    configuration.host = leaf.url
    configuration.api_key[key] = f"Bearer {TOKEN}"
    cfg = ClusterConfig("leaf", "dir", "x", {}, _loaded=[configuration])
    LeafClient(cfg, timeout_s=5).discover(builtin_registry())
    assert [h.get("authorization") for _, h in leaf.requests] == [[f"Bearer {TOKEN}"]] * len(
        leaf.requests
    )


def test_exec_plugin_token(leaf: FakeLeaf, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',\n"
        f"  'kind': 'ExecCredential', 'status': {{'token': {TOKEN!r}}}}}))\n"
    )
    kc = leaf.kubeconfig()
    kc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    c = LeafClient(ClusterConfig("leaf", "dir", "x", kc), timeout_s=5)
    assert "Kustomization" in c.discover(builtin_registry())


def test_bad_kubeconfig_is_a_cluster_error() -> None:
    with pytest.raises(ClusterError, match="unusable"):
        ClusterConfig("bad", "dir", "/x/bad.yaml", {"clusters": []}).configuration()


def test_credentials_never_in_repr_errors_or_logs(
    leaf: FakeLeaf, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    c = client(leaf)
    messages = [repr(c.config), str(c.config)]
    leaf.fail_status = 401
    with pytest.raises(ClusterError) as e:
        c.discover(builtin_registry())
    messages.append(str(e.value))
    messages.extend(r.getMessage() for r in caplog.records)
    assert all(TOKEN not in m for m in messages)
    assert "leaf" in repr(c.config) and leaf.url in repr(c.config)


def test_list_pages_reuse_the_credential_header_for_a_second_only(
    leaf: FakeLeaf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the credential runs the kubeconfig loader's refresh hook (costly): discovery and
    list pages reuse it for LIST_AUTH_TTL_S, then read it again (a renewed token is sent)."""
    from common.leaf import client as leaf_client

    c = client(leaf, page_size=3)
    reads = []
    real = c.headers

    def counted() -> dict[str, str]:
        reads.append(1)
        return real()

    monkeypatch.setattr(c, "headers", counted)
    clock = [1000.0]
    monkeypatch.setattr(leaf_client.time, "monotonic", lambda: clock[0])
    kind = builtin_registry().get("Kustomization")
    assert kind is not None
    assert len(list(c.list_all(kind, KS))) == 7  # three pages
    assert len(reads) == 1
    clock[0] += leaf_client.LIST_AUTH_TTL_S + 0.1
    c.discover(builtin_registry())
    assert len(reads) == 2
    sent = [h.get("authorization") for _path, h in leaf.requests]
    assert len(sent) == 7 and all(a == [f"Bearer {TOKEN}"] for a in sent)  # 3 pages, 4 discovery
