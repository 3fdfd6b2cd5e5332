"""Version drift: the revisions an object group's clusters run (`GET /api/v1/groups`).

A group's revisions are the distinct non-empty `revision` fields of its rows on the clusters it
lists (Flux's applied revision), each with how many of those clusters run it. An empty revision
(a kind without one, or an object not yet applied) is not a revision: it is not counted, so
such clusters never make a group drift. A group drifts when it has two or more revisions.

Order (`ranked`): most clusters first, then by revision text (bytewise, as Python orders
strings), so ties are broken the same way by every replica and page. The first `TOP` are listed
with their counts; the rest are summed into `other` (how many more revisions, on how many
clusters).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TOP", "Revisions", "count", "drifts", "ranked"]

TOP = 5
"""Revisions listed by name per group; the rest are counted in `otherRevisions`."""


@dataclass(frozen=True)
class Revisions:
    top: tuple[tuple[str, int], ...]
    """Up to `TOP` (revision, clusters), most clusters first, then by revision."""
    other_revisions: int = 0
    other_clusters: int = 0

    @property
    def distinct(self) -> int:
        return len(self.top) + self.other_revisions

    def json(self) -> dict[str, object]:
        """The `revisions` and `otherRevisions` fields of a group."""
        return {
            "revisions": [{"revision": r, "clusters": n} for r, n in self.top],
            "otherRevisions": {
                "revisions": self.other_revisions,
                "clusters": self.other_clusters,
            },
        }


def ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    """(revision, clusters), most clusters first, then by revision."""
    return sorted(counts.items(), key=lambda p: (-p[1], p[0]))


def count(revisions: Iterable[str]) -> Revisions:
    """The revisions of one group from its clusters' revisions ("" counts as none)."""
    counts = Counter(r for r in revisions if r)
    order = ranked(counts)
    rest = order[TOP:]
    return Revisions(tuple(order[:TOP]), len(rest), sum(n for _, n in rest))


def drifts(revisions: Iterable[str]) -> bool:
    """Whether the clusters run two or more (non-empty) revisions."""
    first = ""
    for r in revisions:
        if not r:
            continue
        if not first:
            first = r
        elif r != first:
            return True
    return False
