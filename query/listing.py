"""The one grants-confirm flow (`confirmed`) and the reads that go through it: list, time,
flapping and group pages, one group, facets (and query.relations' object). The caller's grants
come from the resolver's cache with no Redis call, are confirmed by the grants version read in
the read's own first round trip, and when that version moved the read is done again under
freshly checked grants. Views stay thin."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from common.index import keys, rows
from common.index.read import facets as reader_facets
from common.index.read.groups import DRAIN_MAX, Group, GroupCursor, GroupPage
from common.index.read.reader import Facets, Filters, Page, PageRequest
from common.index.read.timesort import TimeCursor, TimePage
from common.rbac.authorizer import UserInfo
from common.rbac.grants import Access
from query import metrics
from query.scope import Scope
from query.state import QueryState


class _Counted(Protocol):
    """A read of rows: the grants version read with them, and how many it scanned."""

    version: keys.GrantsVersion | None
    scanned: int


_P = TypeVar("_P", bound=_Counted)
_R = TypeVar("_R")


def confirmed(
    st: QueryState, user: UserInfo, read: Callable[[Scope], tuple[_R, keys.GrantsVersion | None]]
) -> tuple[_R, Scope]:
    """The grants-confirm flow, the one every read of what a caller may list goes through:
    `read(scope)` first under the resolver's cached grants (no Redis call; `scope.checked` is
    False), returning what it read and the grants version it read with its data (None when
    it read none). Unless that is the version the cached grants are valid for, `read` runs
    again under freshly checked grants, whose answer stands."""
    scope = st.scope(user, optimistic=True)
    got, version = read(scope)
    if not scope.checked and version != scope.version:
        scope = st.scope(user)
        got, _ = read(scope)
    return got, scope


def list_page(st: QueryState, user: UserInfo, request: PageRequest) -> tuple[Page, Scope]:
    """One page of what `user` may list, and the scope it was read under."""
    return _counted(
        st,
        user,
        request.filters,
        lambda access, confirm: st.reader.page(access, request, confirm_version=confirm),
    )


def time_page(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    limit: int,
    descending: bool,
    cursor: TimeCursor | None,
) -> tuple[TimePage, Scope]:
    """One page in lastTransitionTime order, under the same optimistic-then-confirmed grants."""
    return _counted(
        st,
        user,
        filters,
        lambda access, confirm: st.time_reader.page(
            access, filters, limit, descending, cursor, confirm
        ),
    )


def flapping_time_page(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    limit: int,
    descending: bool,
    cursor: TimeCursor | None,
) -> tuple[TimePage, Scope]:
    """`flapping=true` in lastTransitionTime order: the flapping rows the caller may list (each
    cluster's small flapping index, read whole: common.index.read.reader.flapping_members), ordered
    by (time, cluster, identity) and cut at the cursor, under the same confirmed grants."""

    def read(access: dict[str, Access], confirm: bool) -> TimePage:
        found, version, scanned = st.reader.flapping_members(access, filters, confirm)
        keyed = sorted(((_at_ms(m), c, rows.identity_bytes(m)), (c, m)) for c, m in found)
        if descending:
            keyed.reverse()
        if cursor is not None:
            mark = (cursor.at, cursor.cluster, cursor.entry)
            keyed = [k for k in keyed if (k[0] < mark if descending else k[0] > mark)]
        page = keyed[:limit]
        after = None
        if len(keyed) > limit:
            at, c, ident = page[-1][0]
            after = TimeCursor(at, c, ident, 0)
        return TimePage([m for _, m in page], after, scanned, version=version)

    return _counted(st, user, filters, read)


def _at_ms(member: bytes) -> int:
    """A member's lastTransitionTime in ms (-1 without one: it sorts as the oldest)."""
    at = rows.split_member(member.decode())[rows.FIELDS.index("lastTransitionTime")]
    return int(float(at) * 1000) if at else -1


def group_page(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    by: str,
    limit: int,
    cursor: GroupCursor | None,
) -> tuple[GroupPage, Scope]:
    """One page of groups across clusters, under the same optimistic-then-confirmed grants."""
    return _counted(
        st,
        user,
        filters,
        lambda access, confirm: st.group_reader.page(access, filters, by, limit, cursor, confirm),
    )


def _counted(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    read: Callable[[dict[str, Access], bool], _P],
) -> tuple[_P, Scope]:
    """`confirmed` for a read of rows: `read(access, confirm_version)` over the visible clusters
    the `cluster` filter keeps, the rows each read scanned counted (a thrown-away read's too)."""

    def scan(scope: Scope) -> tuple[_P, keys.GrantsVersion | None]:
        page = read(scoped_access(scope, filters), not scope.checked)
        metrics.ROWS_SCANNED.inc(page.scanned)
        return page, page.version

    return confirmed(st, user, scan)


def group(
    st: QueryState, user: UserInfo, filters: Filters, key: bytes, by: str
) -> tuple[Group, list[tuple[str, bytes]], Scope]:
    """One group with all its clusters (and an object group's rows), as `user` may list them."""

    def read(
        scope: Scope,
    ) -> tuple[tuple[Group, list[tuple[str, bytes]]], keys.GrantsVersion | None]:
        access = scoped_access(scope, filters)
        got, found, version = st.group_reader.group(access, filters, key, by, not scope.checked)
        return (got, found), version

    (got, found), scope = confirmed(st, user, read)
    return got, found, scope


def facets(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    by: str = "",
    label_keys: tuple[str, ...] = (),
) -> tuple[Facets, Scope]:
    """Counts of what `user` may list (rows, or with `by` the groups of `group_page`), under
    the same optimistic-then-confirmed grants; `label_keys`: rows by those labels' values."""
    if by and (filters.labels or filters.flapping):
        return _counted(
            st,
            user,
            filters,
            lambda access, confirm: _labelled_groups(st, access, filters, by, confirm),
        )
    if by:
        return _counted(
            st,
            user,
            filters,
            lambda access, confirm: st.group_facets.facets(access, filters, by, confirm),
        )
    return _counted(
        st,
        user,
        filters,
        lambda access, confirm: st.reader.facets(access, filters, confirm, label_keys),
    )


def _labelled_groups(
    st: QueryState, access: Mapping[str, Access], filters: Filters, by: str, confirm: bool
) -> Facets:
    """Group facets under a label selector or `flapping` (counted from the matching rows)."""
    version = keys.GrantsVersion(st.reader.r.get(keys.VERSION)) if confirm else None
    wanted = set(filters.clusters)
    clusters = [c for c in sorted(access) if not wanted or c in wanted]
    out = reader_facets.group_counts(st.reader, access, filters, by, clusters, DRAIN_MAX)
    out.version = version
    return out


def scoped_access(scope: Scope, filters: Filters) -> dict[str, Access]:
    """The visible clusters' access, narrowed to the `cluster` filter."""
    if not filters.clusters:
        return scope.visible  # shared, read-only
    wanted = set(filters.clusters)
    return {c: a for c, a in scope.visible.items() if c in wanted}
