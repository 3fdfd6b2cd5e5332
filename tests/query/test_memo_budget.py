"""`FLEETSCOPE_QUERY_MEMO_MIB` bounds the query workers' memos: the app sets the process's
budget at start-up, and its readers' named memos take their shares of it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from common.index.read import memo
from common.settings import Settings
from query.app import create_app
from query.state import QueryState


@pytest.fixture
def restore_budget() -> Iterator[None]:
    before = memo.budget_bytes()
    yield
    memo.set_budget(before / 2**20)


@pytest.mark.usefixtures("restore_budget")
def test_the_app_shares_its_memo_budget_among_its_readers(redis_url: str) -> None:
    app = create_app(Settings(redis_url=redis_url, auth_mode="header", query_memo_mib=64))
    assert memo.budget_bytes() == 64 * 2**20
    st: QueryState = app.extensions["fleetscope"]
    states = st.group_facets._states
    assert states.max_bytes == int(memo.SHARES["group_facets.states"] * 64 * 2**20)
    assert st.reader._pages.max_bytes > 0 and st.time_reader._segments.max_bytes > 0

    create_app(Settings(redis_url=redis_url, auth_mode="header"))  # the default: entry counts only
    assert memo.budget_bytes() == 0 and states.max_bytes == 0


@pytest.mark.usefixtures("restore_budget")
def test_encoded_facets_answers_stay_within_their_share() -> None:
    """Each write makes new counts, so a new encoded answer: at fleet L one is 0.5-0.8 MB, and
    they once piled up to a count of 1,024 per worker, outside the budget."""
    from common.index.read.facets import Facets
    from query import body

    memo.set_budget(4)  # MiB: body.facets' share is ~160 KB
    body._facets.clear()
    namespaces = {f"team-{i:05d}": i for i in range(2_000)}  # ~40 KB encoded
    held = []
    for n in range(40):  # 40 writes' counts, each answer asked once
        counts = Facets(total=n, clusters={"c": n}, namespaces=namespaces)
        held.append(counts)
        body.facets_response(counts, {})
    assert 0 < body._facets.nbytes <= body._facets.max_bytes
    assert len(body._facets) < 40
    again = body.facets_response(held[-1], {})  # the newest is still there, answered alike
    assert json.loads(again.get_data())["total"] == 39
