"""Row model: building rows from raw objects, and the compact member encoding round trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.index import rows
from common.kinds.registry import builtin_registry, load_registry
from tests.support import rowfactory

KUSTOMIZATION = builtin_registry().get("Kustomization")
REV = "main@sha1:0123456789abcdef0123456789abcdef01234567"


def _obj(**status: object) -> dict[str, object]:
    return {
        "metadata": {
            "name": "apps",
            "namespace": "team-a",
            "generation": 2,
            "annotations": {"fleetscope.io/ui-url": "https://ui.example/apps"},
        },
        "spec": {},
        "status": {"observedGeneration": 2, "lastAppliedRevision": REV, **status},
    }


def test_build_row_from_flux_object() -> None:
    assert KUSTOMIZATION is not None
    obj = _obj(
        conditions=[
            {
                "type": "Ready",
                "status": "True",
                "reason": "ReconciliationSucceeded",
                "message": f"Applied revision: {REV}",
                "lastTransitionTime": "2026-11-20T10:00:00Z",
            }
        ]
    )
    row = rows.build_row("c1", KUSTOMIZATION, "kustomize.toolkit.fluxcd.io/v1", obj)
    assert row == {
        "cluster": "c1",
        "namespace": "team-a",
        "kind": "Kustomization",
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "name": "apps",
        "status": "healthy",
        "suspended": False,
        "reason": "ReconciliationSucceeded",
        "message": f"Applied revision: {REV}",
        "warnings": 0,
        "lastTransitionTime": "2026-11-20T10:00:00Z",
        "revision": REV,
        "uiUrl": "https://ui.example/apps",
        "labels": {},
    }
    member = rows.encode(row)
    assert REV not in member.split("\x00")[5]  # the message stores a placeholder for the revision
    served = {**row, "failingSince": None, "transitions24h": 0}
    assert rows.decode("c1", member) == served
    assert rows.decode_page([("c1", member.encode()), ("c2", member.encode())]) == [
        served,
        {**served, "cluster": "c2"},
    ]
    assert rows.identity(member) == rows.sort_key("team-a", "Kustomization", "apps")
    assert rows.status_of(member) == "healthy"


def test_members_sort_by_namespace_then_kind_then_name() -> None:
    def member(ns: str, kind: str, name: str) -> str:
        return rowfactory.member("c", ns, kind, name)

    ordered = [
        member("a", "Kustomization", "x"),
        member("a", "Kustomization", "x-y"),
        member("a", "VirtualService", "a"),
        member("a-b", "Bucket", "a"),
        member("b", "Alert", "a"),
    ]
    assert sorted(ordered) == ordered


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


_reasons = st.one_of(_text, st.sampled_from(list(rows.REASON_CODES)), _text.map("~".__add__))
_messages = st.one_of(
    _text,
    st.sampled_from([m.replace(rows.REV_MARK, "main@sha1:0123456789") for m in rows.MESSAGE_CODES]),
    _text.map("~".__add__),
)


@given(
    ns=st.from_regex(r"[a-z0-9-]{0,20}", fullmatch=True),
    name=_text,
    message=_messages,
    reason=_reasons,
    revision=_text,
    status=st.sampled_from(list(rows.STATUS_CODES)),
    suspended=st.booleans(),
    warnings=st.integers(0, 500),
)
def test_encoding_round_trips(
    ns: str,
    name: str,
    message: str,
    reason: str,
    revision: str,
    status: str,
    suspended: bool,
    warnings: int,
) -> None:
    row = rows.Row(
        cluster="c",
        namespace=ns,
        kind="HelmRelease",
        apiVersion="v2",
        name=name.replace("\x00", ""),
        status=status,
        suspended=suspended,
        reason=reason,
        message=message,
        warnings=warnings,
        lastTransitionTime="2026-01-02T03:04:05Z",
        revision=revision,
        uiUrl=None,
    )
    encoded = rows.encode(row)
    back = rows.decode("c", encoded)
    assert rows.decode_page([("c", encoded.encode())]) == [back]  # the page path decodes alike
    assert json.loads(rows.row_json("c", encoded.encode())) == back  # and renders alike
    assert back["status"] == status and back["namespace"] == ns
    assert back["suspended"] is suspended and back["warnings"] == warnings
    assert rows.suspended_of(encoded) is suspended and rows.status_of(encoded) == status
    assert rows.parse_count_field(rows.count_field(encoded)) == ("HelmRelease", status, suspended)
    assert back["reason"] == reason.replace("\x00", " ").replace("\x01", " ")
    assert back["message"] == message.replace("\x00", " ").replace("\x01", " ")
    assert back["revision"] == revision.replace("\x00", " ").replace("\x01", " ")


def test_a_suspended_failing_object_is_unhealthy_and_suspended() -> None:
    helm = builtin_registry().get("HelmRelease")
    assert helm is not None
    failed = {"type": "Ready", "status": "False", "reason": "UpgradeFailed", "message": "boom"}
    obj = {
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"suspend": True},
        "status": {"conditions": [failed]},
    }
    row = rows.build_row("c1", helm, "helm.toolkit.fluxcd.io/v2", obj)
    assert (row["status"], row["suspended"], row["reason"]) == ("unhealthy", True, "UpgradeFailed")
    member = rows.encode(row)
    assert member.split(rows.SEP)[3] == "U"  # the health's code, upper-case when suspended
    # served rows say since when it fails: not known without a transition time or history
    assert rows.decode("c1", member) == {**row, "failingSince": None, "transitions24h": 0}
    assert rows.build_row("c1", helm, "v2", {**obj, "spec": {}})["suspended"] is False


def test_cluster_scoped_rows_have_an_empty_namespace_and_sort_first() -> None:
    gc = builtin_registry().get("GatewayClass")
    assert gc is not None and not gc.namespaced
    obj = {"metadata": {"name": "istio", "namespace": "ignored"}, "status": {}}
    row = rows.build_row("c1", gc, "gateway.networking.k8s.io/v1", obj)
    assert row["namespace"] == ""
    member = rows.encode(row)
    assert rows.identity(member) == rows.sort_key("", "GatewayClass", "istio")
    assert rows.identity_bytes(member.encode()) == b"\x00GatewayClass\x00istio\x00"
    assert member.encode() < rows.namespace_prefix("a")
    assert rows.name_entry(member) == ("istio", "\x00GatewayClass\x00")


def test_members_written_before_suspension_left_the_statuses_still_decode() -> None:
    legacy = rows.SEP.join(("ns", "Kustomization", "apps", "s", "Suspended", "", "", "", "v1", ""))
    assert rows.is_member(legacy.encode())
    row = rows.decode("c1", legacy)
    assert (row["status"], row["suspended"], row["warnings"]) == ("unknown", True, 0)
    assert rows.count_field(legacy) == "Kustomization\x00unknown\x00suspended"


@pytest.mark.parametrize(
    ("statuses", "suspended", "codes"),
    [
        ((), None, "hHuUpPkKs"),
        (("unhealthy",), None, "uU"),
        (("unhealthy",), False, "u"),
        (("unhealthy", "unknown"), True, "UKs"),
        ((), True, "HUPKs"),
        ((), False, "hupk"),
    ],
)
def test_codes_select_health_and_suspension(
    statuses: tuple[str, ...], suspended: bool | None, codes: str
) -> None:
    assert sorted(rows.codes_for(statuses, suspended)) == sorted(codes)


def test_ui_url_comes_from_the_kinds_template_unless_the_object_names_one(tmp_path) -> None:
    kinds = tmp_path / "kinds.yaml"
    kinds.write_text(
        '- kind: Kustomization\n  ui_url_template: "https://weave.example/{cluster}/{namespace}/{name}"\n'
    )
    kust = load_registry(str(kinds)).get("Kustomization")
    assert kust is not None
    obj = _obj()
    del obj["metadata"]["annotations"]  # type: ignore[attr-defined]
    row = rows.build_row("c 1", kust, "kustomize.toolkit.fluxcd.io/v1", obj)
    assert row["uiUrl"] == "https://weave.example/c%201/team-a/apps"
    assert rows.decode("c1", rows.encode(row))["uiUrl"] == row["uiUrl"]  # stored, served as is
    annotated = rows.build_row("c1", kust, "v1", _obj())
    assert annotated["uiUrl"] == "https://ui.example/apps"  # the object's own link wins


def test_builtin_api_versions_are_stored_as_codes_and_read_back() -> None:
    from common.kinds.registry import BUILTIN_KINDS

    served = {f"{k.group}/{v}" for k in BUILTIN_KINDS for v in k.versions}
    assert served <= set(rows.API_VERSION_CODES)  # a new built-in version needs a new code
    assert len(set(rows.API_VERSION_CODES.values())) == len(rows.API_VERSION_CODES)
    for api_version in ("kustomize.toolkit.fluxcd.io/v1", "example.io/v1"):
        row = rows.decode("c", rows.encode({**ROW_FOR_CODES, "apiVersion": api_version}))
        assert row["apiVersion"] == api_version
    member = rows.encode({**ROW_FOR_CODES, "apiVersion": "kustomize.toolkit.fluxcd.io/v1"})
    assert "toolkit" not in member
    assert '"apiVersion":"kustomize.toolkit.fluxcd.io/v1"' in rows.row_json("c", member.encode())
    assert rows.decode_page([("c", member.encode())])[0]["apiVersion"].startswith("kustomize")


ROW_FOR_CODES = rowfactory.row("c", "apps", "Kustomization", "a")


def test_common_reasons_and_messages_are_stored_as_codes_and_read_back() -> None:
    assert len(set(rows.REASON_CODES.values())) == len(rows.REASON_CODES)
    assert len(set(rows.MESSAGE_CODES.values())) == len(rows.MESSAGE_CODES)
    rev = "main@sha1:a743a58d5681944851038a42e78cdde92968563c"
    row = {
        **ROW_FOR_CODES,
        "reason": "ReconciliationSucceeded",
        "message": f"Applied revision: {rev}",
        "revision": rev,
    }
    member = rows.encode(row)  # type: ignore[arg-type]
    assert "Reconciliation" not in member and "Applied" not in member
    back = rows.decode("c", member)
    assert (back["reason"], back["message"]) == (row["reason"], row["message"])
    assert rows.decode_page([("c", member.encode())]) == [back]
    assert json.loads(rows.row_json("c", member.encode())) == back
    # a value that merely looks like a code is kept as written, not read as one
    odd = rows.encode({**ROW_FOR_CODES, "reason": "~0", "message": "~1 tilde"})
    assert (rows.decode("c", odd)["reason"], rows.decode("c", odd)["message"]) == ("~0", "~1 tilde")


def _member_as_built(kind, api_version, obj, findings=None, extra=(), services=None):  # type: ignore[no-untyped-def]
    """rows.member as it was written first: a Row, then its encoding (the reference)."""
    from common.index import edges
    from common.kinds import relations

    row = rows.build_row("c1", kind, api_version, obj, findings)
    refs = relations.extract(kind, obj)
    if extra:
        refs = list(dict.fromkeys([*refs, *extra]))
    ns, key, name = row["namespace"], row["kind"], row["name"]
    refs = [r for r in refs if r.name != name or r.kind != key or r.namespace != ns]
    return rows.encode(row, edges.encode(ns, refs, services))


def test_member_is_the_encoding_of_the_built_row_for_a_generated_cluster() -> None:
    """`member` skips the Row on the collector's hot path: it must encode exactly what
    `encode(build_row(...))` does, for every kind of a generated cluster."""
    import orjson

    from kubesim.catalog import Catalog
    from kubesim.gen.fleet import generate_fleet

    registry = builtin_registry()
    by_resource = {(k.group, k.plural): k for k in registry}
    seen: set[str] = set()
    for res, _ns, _name, raw in generate_fleet(1, 40, seed=5).objects(0, Catalog.default()):
        kind = by_resource.get((res.group, res.plural))
        if kind is None:
            continue
        obj = orjson.loads(raw)
        api_version = kind.api_version(res.version)
        seen.add(kind.key)
        assert rows.member("c1", kind, api_version, obj) == _member_as_built(kind, api_version, obj)
    assert len(seen) >= 25  # Flux, Istio, Gateway API and Kuadrant kinds were compared


@given(
    labels=st.dictionaries(
        st.sampled_from(
            ["app", "team", "app.kubernetes.io/name", "x/y", "Bad Key", "a" * 70, "k", "z.io/q"]
        ),
        st.one_of(
            st.sampled_from(["apps", "team-a", "apps-team-a", "flux", "", "-bad"]), st.text()
        ),
        max_size=8,
    ),
    many=st.integers(0, 40),
    name=st.sampled_from(["apps", "team-a", "n" * 70, "a..b", "x"]),
    own=st.lists(
        st.sampled_from(["app", "app.kubernetes.io/instance", "Bad Key", "q"]), max_size=3
    ),
)
def test_member_labels_match_the_built_rows(
    labels: dict[str, str], many: int, name: str, own: list[str]
) -> None:
    """Labels valued the object's name, namespace or `<name>-<namespace>` (stored as marks and
    checked apart from the shared pairs), among others valid and not, the name too (`n` * 70 is
    a valid name but not a valid label value)."""
    mine = {k: v for k, v in zip(own, (name, "team-a", f"{name}-team-a"), strict=False)}
    raw = {**labels, **mine, **{f"k{i:02d}": "v" * (i % 30) for i in range(many)}}
    obj = _obj()
    obj["metadata"]["name"] = name  # type: ignore[index]
    obj["metadata"]["labels"] = raw  # type: ignore[index]
    assert KUSTOMIZATION is not None
    api_version = "kustomize.toolkit.fluxcd.io/v1"
    assert rows.member("c1", KUSTOMIZATION, api_version, obj) == _member_as_built(
        KUSTOMIZATION, api_version, obj
    )


@pytest.mark.parametrize(
    "iso",
    [
        "2026-11-20T10:00:00Z",
        "2026-02-31T25:61:99Z",  # timegm does not check the day or the time of day
        "1970-01-01t00:00:00",
        "2026-01-01 00:00:00.5+02:00",
        "2026-13-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "2026-1a-01T00:00:00Z",
        "2026-01-01T0x:00:00Z",
        "2026-01-01T00:00:0",
        "",
    ],
)
def test_epoch_is_timegm_of_the_sliced_fields(iso: str) -> None:
    import calendar

    try:
        fields = (iso[0:4], iso[5:7], iso[8:10], iso[11:13], iso[14:16], iso[17:19])
        want = str(calendar.timegm((*map(int, fields), 0, 0, 0))) if len(iso) >= 19 else ""
    except ValueError:
        want = ""
    assert rows._epoch(iso) == want
