"""Label selectors as k8s.io/apimachinery parses and matches them (messages, positions,
semantics), and the labels a row keeps (validated, capped, said when cut) through the member
encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common import labels
from common.index import label_field, rows
from common.kinds.registry import builtin_registry
from tests.support import rowfactory

_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_NAME_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

MALFORMED = [
    # (selector, upstream's message, position where parsing stopped)
    ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'", 7),
    ("a,", "found '', expected: identifier after ','", 2),
    ("a,,b", "found ',', expected: identifier after ','", 2),
    ("=a", "found '=', expected: !, identifier, or 'end of string'", 0),
    (",a", "found ',', expected: !, identifier, or 'end of string'", 0),
    ("a=b c", "found 'c', expected: ',' or 'end of string'", 4),
    ("a in x", "unable to parse requirement: found 'x' expected: '('", 5),
    ("a (", "unable to parse requirement: found '(', expected: '=', '!=', '==', 'in', notin'", 2),
    ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'", 8),
    ("a notin (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier", 9),
    ("!", "unable to parse requirement: found '', expected: identifier", 1),
    ("!=a", "found '!=', expected: !, identifier, or 'end of string'", 0),
    ("a==!", "unable to parse requirement: found '!', expected: identifier", 3),
    ("a=b!", "found '!', expected: ',' or 'end of string'", 3),
    ("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": "
     "for 'Gt', 'Lt' operators, the value must be an integer", 2),
    ("a=-b", f'unable to parse requirement: values[0][a]: Invalid value: "-b": {_VALUE_RULE}', 2),
    ("a=" + "x" * 64, "unable to parse requirement: values[0][a]: Invalid value: "
     f'"{"x" * 64}": must be no more than 63 characters', 2),
    ("Bad_/x", 'unable to parse requirement: <nil>: Invalid value: "Bad_/x": prefix part a '
     "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
     "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
     r"used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
     0),
    ("x/-y", f'unable to parse requirement: <nil>: Invalid value: "x/-y": {_NAME_RULE}', 0),
    ("x/", 'unable to parse requirement: <nil>: Invalid value: "x/": name part must be non-empty',
     0),
    ("/x", 'unable to parse requirement: <nil>: Invalid value: "/x": prefix part must be '
     "non-empty", 0),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message", "position"), MALFORMED)
def test_malformed_selectors_are_refused_as_the_apiserver_refuses_them(
    text: str, message: str, position: int
) -> None:
    with pytest.raises(labels.SelectorError) as e:
        labels.parse(text)
    assert (e.value.message, e.value.position) == (message, position)


L = {"app": "web", "tier": "db", "n": "5", "empty": ""}
SEMANTICS = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=api", False),
    ("app!=api", True),
    ("missing!=x", True),  # != matches objects without the key
    ("missing=", False),
    ("empty=", True),
    ("empty", True),
    ("!empty", False),
    ("!missing", True),
    ("missing", False),
    ("app in (web,api)", True),
    ("app in (api)", False),
    ("missing in (x)", False),
    ("app notin (api)", True),
    ("app notin (web)", False),
    ("missing notin (web)", True),  # notin matches objects without the key
    ("empty in ()", True),  # `()` is the set holding "" upstream
    ("app in ()", False),
    ("empty notin (,x)", False),
    ("n>4", True),
    ("n>5", False),
    ("n<6", True),
    ("app>1", False),  # not an integer: no match
    ("missing<1", False),
    ("app=web,tier=db", True),
    ("app=web,tier=cache", False),
    (" app = web , tier in ( db , x ) ", True),
    ("in in (in),notin notin (notin)", True),  # keywords where values are expected
]


@pytest.mark.parametrize(("text", "expected"), SEMANTICS)
def test_selectors_match_as_upstream(text: str, expected: bool) -> None:
    have = {**L, "in": "in", "notin": "x"}
    assert labels.parse(text).matches(have) is expected


def test_canonical_text_is_upstreams_string() -> None:
    s = labels.parse("b notin (y,x), !c ,a==1,d")
    assert s.canonical() == "a==1,b notin (x,y),!c,d"
    assert labels.parse("a=1,b in (x)").canonical() == labels.parse("b in(x),a=1").canonical()


KUSTOMIZATION = builtin_registry().get("Kustomization")


def _obj(meta_labels: object) -> dict[str, object]:
    return {
        "metadata": {"name": "apps", "namespace": "team-a", "labels": meta_labels},
        "status": {},
    }


def test_rows_keep_valid_labels_and_say_when_some_were_cut() -> None:
    assert KUSTOMIZATION is not None
    raw = {
        "app.kubernetes.io/name": "apps",  # the object's name: stored as a mark
        "team": "team-a",  # the namespace: stored as a mark
        "tier": "web",
        "Bad Key": "x",  # invalid: dropped
        "ok": "\x1b[31mred",  # invalid value (a terminal escape): dropped
    }
    row = rows.build_row("c1", KUSTOMIZATION, "kustomize.toolkit.fluxcd.io/v1", _obj(raw))
    assert row["labels"] == {"app.kubernetes.io/name": "apps", "team": "team-a", "tier": "web"}
    assert row.get("labelsTruncated") is True
    member = rows.encode(row)
    stored = rows.split_member(member)[rows.FIELDS.index("labels")]
    assert stored == "!#@{^,tier=web"
    back = rows.decode("c1", member)
    assert back["labels"] == row["labels"] and back["labelsTruncated"] is True
    assert rows.labels_of(member.encode()) == row["labels"]
    text = rows.row_json("c1", member.encode())
    assert '"labels":{"app.kubernetes.io/name":"apps","team":"team-a","tier":"web"}' in text
    assert '"labelsTruncated":true' in text
    assert rows.decode_page([("c1", member.encode())])[0]["labels"] == row["labels"]


def test_labels_are_capped_by_count_and_size() -> None:
    assert KUSTOMIZATION is not None
    many = {f"k{i:03d}": "v" for i in range(rows.MAX_LABELS + 5)}
    row = rows.build_row("c1", KUSTOMIZATION, "v1", _obj(many))
    assert len(row["labels"]) == rows.MAX_LABELS and row["labelsTruncated"] is True
    assert list(row["labels"]) == sorted(many)[: rows.MAX_LABELS]  # the first keys kept
    big = {f"key-{i}": "x" * 63 for i in range(20)}
    row = rows.build_row("c1", KUSTOMIZATION, "v1", _obj(big))
    assert row["labelsTruncated"] is True
    assert len(rows.labels_field(row["labels"], "apps", "team-a")) <= rows.MAX_LABELS_BYTES
    plain = rows.build_row("c1", KUSTOMIZATION, "v1", _obj({"a": "b"}))
    assert plain["labels"] == {"a": "b"} and "labelsTruncated" not in plain
    for junk in (None, "a=b", ["a"], {"a": 1}):
        got = rows.build_row("c1", KUSTOMIZATION, "v1", _obj(junk))
        assert got["labels"] == {}


def test_members_written_before_labels_read_as_unlabelled() -> None:
    old = rows.SEP.join(rows.split_member(rowfactory.member("c1", "ns", "Kustomization", "a"))[:-1])
    assert rows.labels_of(old) == {}
    assert rows.decode("c1", old)["labels"] == {}
    assert rows.without_recent(old).count(rows.SEP) == len(rows.FIELDS) - 1
    assert not rows.has_recent(old)


_KEYS = [*label_field.KEY_CODES, "tier", "example.com/x", "a", "z.io/y_1"]
_VALUES = st.one_of(
    st.sampled_from(["", "web", "ns-1", "web-ns-1", *label_field.VALUE_CODES, "1.0.0"]),
    st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?", fullmatch=True),
)


@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=12), st.booleans())
def test_the_labels_field_round_trips(got: dict[str, str], cut: bool) -> None:
    field = label_field.encode(got, "web", "ns-1", cut)
    assert "\x00" not in field
    assert label_field.decode(field, "web", "ns-1") == (dict(sorted(got.items())), cut)
    member = rowfactory.member("c1", "ns-1", "Kustomization", "web")
    parts = rows.split_member(member)
    parts[rows.FIELDS.index("labels")] = field
    stored = rows.SEP.join(parts).encode()
    assert rows.labels_of(stored) == got
    for text in ("tier=db", "app.kubernetes.io/name in (web,x)", "a", "team!=x,!example.com/x"):
        sel = labels.parse(text)
        if sel.matches(got):  # the quick byte test never drops a match
            assert all(any(n in stored for n in alts) for alts in label_field.needles(sel))


def test_common_values_and_marks_are_short() -> None:
    kubesim_like = {
        "app.kubernetes.io/name": "web",
        "app.kubernetes.io/instance": "web-app-0001",
        "app.kubernetes.io/version": "1.0.0",
        "app.kubernetes.io/component": "mesh",
        "app.kubernetes.io/part-of": "app-0001",
        "app.kubernetes.io/managed-by": "flux",
        "fleetscope.io/team": "team-73",
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "app-0001",
    }
    field = label_field.encode(kubesim_like, "web", "app-0001")
    assert len(field) <= 32, field


def test_the_label_caches_do_not_grow_with_the_clusters_a_process_has_seen() -> None:
    """Every cluster brings thousands of label pairs of its own (its objects' names): what the
    caches keep must not grow with how many clusters a long-lived process has synced (a Celery
    child crept ~0.5 MiB per new cluster while every pair stayed until 65,536)."""
    label_field._PIECES.clear()
    label_field._valid_value.cache_clear()
    sizes = []
    for cluster in range(6):
        for i in range(6_000):
            name = f"c{cluster}-app-{i}"
            labels = {"app": name, "team": "team-01", "tier": f"tier-{i % 50}"}
            got = label_field.of_object(labels, name, "apps")
            assert label_field.decode(got, name, "apps") == (labels, False)
            assert label_field.capped(labels) == (labels, False)
        sizes.append(len(label_field._PIECES))
    assert max(sizes) <= 4096, sizes
    assert label_field._valid_value.cache_info().currsize <= 4096


@given(st.text(max_size=70) | st.from_regex(r"[A-Za-z0-9._-]{0,70}", fullmatch=True))
def test_the_quick_value_check_agrees_with_the_messages(value: str) -> None:
    assert labels.valid_value(value) == (not labels.value_errors(value))
