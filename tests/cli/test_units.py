"""The client's pure parts, without a server: kubectl's AGE, KIND resolution (short names,
plurals, case), config precedence (flags > env > context), ExecCredential parsing, table
layout, and the List printers (streamed or not, the same document)."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from fleetscope.client import kinds
from fleetscope.client.config import Flags, resolve
from fleetscope.client.credentials import StaticToken, TokenFile, parse_exec_output
from fleetscope.client.errors import BadInput, Unauthenticated
from fleetscope.client.printers import ListPrinter, TablePrinter, object_name
from fleetscope.client.table import age_since, human_age, write_table

H, D = 3600, 86400


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [  # the cases of k8s.io/apimachinery/pkg/util/duration's HumanDuration tests
        (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (1, "1s"), (70, "70s"), (120, "2m"),
        (190, "3m10s"), (600, "10m"), (70 * 60, "70m"), (3 * H + 10 * 60, "3h10m"),
        (8 * H, "8h"), (47 * H, "47h"), (49 * H, "2d1h"), (8 * D + 2 * H, "8d"),
        (367 * D, "367d"), (365 * 2 * D + 25 * H, "2y1d"), (365 * 8 * D + 2 * H, "8y"),
    ],
)  # fmt: skip
def test_human_age_is_kubectls(seconds: int, shown: str) -> None:
    assert human_age(seconds) == shown


def test_age_since_a_timestamp() -> None:
    now = dt.datetime(2024, 5, 10, 12, 0, tzinfo=dt.UTC)
    assert age_since("2024-05-10T11:55:00Z", now) == "5m"
    assert age_since("2024-05-07T12:00:00+00:00", now) == "3d"
    assert age_since(None, now) == "<unknown>" and age_since("yesterday", now) == "<invalid>"


SERVER_KINDS = [
    "Kustomization",
    "HelmRelease",
    "GitRepository",
    "VirtualService",
    "DestinationRule",
    "Gateway",
    "ServiceEntry",
    "ImagePolicy",
    "HTTPRoute",
]


@pytest.mark.parametrize(
    ("typed", "keys"),
    [
        (["ks"], ["Kustomization"]), (["KS,HR"], ["Kustomization", "HelmRelease"]),
        (["kustomizations", "Kustomization"], ["Kustomization"]), (["gitrepo"], ["GitRepository"]),
        (["vs,dr", "gw"], ["VirtualService", "DestinationRule", "Gateway"]),
        (["serviceentries"], ["ServiceEntry"]), (["imagepolicies", "imgpol"], ["ImagePolicy"]),
        (["httproutes"], ["HTTPRoute"]),  # a kind the server added: kind and plural still work
    ],
)  # fmt: skip
def test_kinds_resolve_like_kubectl(typed: list[str], keys: list[str]) -> None:
    assert kinds.resolve(typed, SERVER_KINDS) == keys


def test_unknown_and_unserved_kinds_are_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown kind 'pods'; this server knows Kustomization"):
        kinds.resolve(["pods"], SERVER_KINDS)
    with pytest.raises(BadInput, match="unknown kind 'ap'"):
        kinds.resolve(["ap"], SERVER_KINDS)  # a short name of a kind this server lacks
    assert kinds.resolve(["ap"], []) == ["AuthorizationPolicy"]  # no document: built-in kinds


def test_the_two_gateways_resolve_apart() -> None:
    """Istio's Gateway is `Gateway` (gw); Gateway API's is keyed `K8sGateway` (gtw, its CRD's)."""
    known = ["Gateway", "K8sGateway", "GatewayClass"]
    assert kinds.resolve(["gw", "gtw", "gc"], known) == ["Gateway", "K8sGateway", "GatewayClass"]
    assert kinds.resolve(["gateways", "k8sgateway"], known) == ["Gateway", "K8sGateway"]
    assert kinds.resolve(["httproutes", "ratelimitpolicy"], []) == ["HTTPRoute", "RateLimitPolicy"]


def test_plurals() -> None:
    assert [kinds.plural(k) for k in ("Gateway", "Telemetry", "Bucket", "Proxy", "Mesh")] == [
        "gateways",
        "telemetries",
        "buckets",
        "proxies",
        "meshes",
    ]


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


CONFIG = """
current-context: prod
contexts:
- name: prod
  server: https://prod.example/
  certificate-authority: certs/ca.pem
  token-file: token
- name: dev
  server: http://127.0.0.1:8080
  token: from-context
  insecure-skip-tls-verify: true
"""


def test_config_precedence_flags_then_env_then_context(tmp_path: Path) -> None:
    path = str(config(tmp_path, CONFIG))
    ctx = resolve(Flags(config=path), {})
    assert ctx.server == "https://prod.example" and ctx.verify == str(tmp_path / "certs/ca.pem")
    assert isinstance(ctx.credential, TokenFile) and ctx.credential.path == tmp_path / "token"
    env = {"FLEETSCOPE_SERVER": "https://env.example", "FLEETSCOPE_TOKEN": "from-env"}
    from_env = resolve(Flags(config=path), env)
    assert from_env.server == "https://env.example"
    assert from_env.credential.token() == "from-env"
    flags = resolve(Flags(config=path, server="https://flag.example", context="dev"), env)
    assert flags.server == "https://flag.example" and flags.verify is False
    assert flags.credential.token() == "from-env"  # no token flag: env beats the context
    assert resolve(Flags(config=path, context="dev"), {}).credential.token() == "from-context"
    by_env_path = resolve(Flags(), {"FLEETSCOPE_CONFIG": path})
    assert by_env_path.server == "https://prod.example"


def test_config_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = [
        ("contexts: [{name: a, server: x, tokn: y}]", "unknown field(s) tokn"),
        ("contexts: [{name: a, token: x, token-file: y}]", "set only one of token, token-file"),
        ("contexts: [{name: a, exec: {args: [x]}}]", "exec needs a `command`"),
        ("contexts: [{server: x}]", "must be a mapping with a `name`"),
        ("contexts: {a: 1}", "`contexts` must be a list"),
        ("current-context: b\ncontexts: [{name: a}]", "no context 'b'"),
        ("contexts: [{name: a, server: example.com}]\ncurrent-context: a", "must be an http"),
        ("{", "is not valid YAML"),
    ]
    for text, message in bad:
        with pytest.raises(BadInput, match=re.escape(message)):
            resolve(Flags(config=str(config(tmp_path, text))), {})
    with pytest.raises(BadInput, match="either a certificate authority or insecure"):
        resolve(
            Flags(server="https://x", certificate_authority="ca", insecure_skip_tls_verify=True), {}
        )


def test_a_token_is_never_in_a_repr() -> None:
    assert "s3cret" not in repr(StaticToken("s3cret", "FLEETSCOPE_TOKEN"))
    assert "s3cret" not in repr(resolve(Flags(server="http://x"), {"FLEETSCOPE_TOKEN": "s3cret"}))


def test_exec_output() -> None:
    cred = {
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1",
        "status": {"token": "abc", "expirationTimestamp": "2099-01-01T00:00:00Z"},
    }
    assert parse_exec_output(json.dumps(cred)) == "abc"
    assert parse_exec_output("  plain-token\n") == "plain-token"
    for out, message in [
        ("", "neither an ExecCredential nor a token"),
        ("two words", "neither an ExecCredential nor a token"),
        ("{nope", "does not parse"),
        ('{"kind": "Secret"}', "not an ExecCredential"),
        ('{"kind": "ExecCredential", "status": {}}', "without status.token"),
        ('{"kind": "ExecCredential", "status": {"clientCertificateData": "x"}}', "needs a token"),
    ]:
        with pytest.raises(Unauthenticated, match=message):
            parse_exec_output(out)


def test_tables_align_and_only_widen() -> None:
    out = io.StringIO()
    widths = write_table(out, ["A", "BB", "MESSAGE"], [["xxx", "y", "long message"]])
    widths = write_table(out, None, [["x", "yyyy", "m"]], widths)
    assert out.getvalue().splitlines() == [
        "A     BB   MESSAGE",
        "xxx   y    long message",
        "x     yyyy   m",
    ]
    assert widths == [3, 4]


ROWS = [
    {
        "cluster": "c1",
        "namespace": "ns",
        "kind": "Kustomization",
        "name": "a",
        "status": "healthy",
        "message": "line one\nline two",
        "lastTransitionTime": None,
        "suspended": True,
    },
    {
        "cluster": "c1",
        "namespace": "",
        "kind": "ClusterThing",
        "name": "b",
        "status": "unknown",
        "message": "",
        "lastTransitionTime": None,
    },
]


def test_table_cells() -> None:
    out = io.StringIO()
    printer = TablePrinter(out, wide=False, blocked_by=False)
    printer.page(ROWS)
    lines = out.getvalue().splitlines()
    assert lines[1].split() == [
        "c1",
        "ns",
        "Kustomization",
        "a",
        "healthy,suspended",
        "<unknown>",
        "line",
        "one",
        "line",
        "two",
    ]
    assert lines[2].split() == ["c1", "<none>", "ClusterThing", "b", "unknown", "<unknown>"]
    assert [object_name(r) for r in ROWS] == ["c1/ns/Kustomization/a", "c1/_/ClusterThing/b"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("pages", [[], [[]], [ROWS[:1], [], ROWS[1:]], [ROWS]])
def test_list_printers_stream_the_same_document(fmt: str, pages: list[list[dict]]) -> None:
    texts = []
    for stream in (False, True):
        out = io.StringIO()
        printer = ListPrinter(out, fmt, stream)
        for page in pages:
            printer.page(page)
        printer.done()
        texts.append(out.getvalue())
    assert texts[0] == texts[1]
    doc = json.loads(texts[0]) if fmt == "json" else yaml.safe_load(texts[0])
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
    assert doc["items"] == [r for page in pages for r in page]


def test_status_lists_the_registrys_problems() -> None:
    from fleetscope.client.status import cluster_cells, write_registry

    out = io.StringIO()
    write_registry(
        out,
        {
            "notReady": [
                {"cluster": "ns.a", "source": "capi", "reason": "control plane not ready"}
            ],
            "problems": [
                {"type": "conflict", "message": "claimed twice", "cluster": "b", "source": ""}
            ],
            "hidden": 2,
        },
    )
    text = out.getvalue()
    assert "ns.a (capi): not ready: control plane not ready" in text
    assert "b: conflict: claimed twice" in text and "(2 more not visible to you)" in text
    empty = io.StringIO()
    write_registry(empty, {"notReady": [], "problems": [], "hidden": 0})
    assert empty.getvalue() == ""
    assert "not-ready" in cluster_cells({"cluster": "x", "state": "pending", "ready": False})[1]
