"""One logical hash stored as a fixed number of small hashes, chosen by CRC32 of the field.

Redis keeps a hash of up to 128 short fields as a listpack (a few bytes of overhead a field)
and a bigger one as a hash table (~60 bytes more a field). The per-cluster hashes with one
entry per namespace or per depended-on node hold thousands of fields, so they are spread over
`count` hashes of the cluster (same hash tag: still one slot, one MULTI/EXEC): ~30 bytes a field
instead of ~90. Reads of a few fields cost one HMGET per bucket touched, in the caller's pipeline.
A listpack also needs every value to be at most 64 bytes: with an `overflow` key, longer values
(a GitRepository many Kustomizations depend on) live there instead, so one long value does not
turn its whole bucket into a hash table; reads then ask both places (one HMGET more).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from common.redis_client import text

Groups = list[tuple[str, list[str]]]
"""(bucket key, fields) per HMGET queued, in order."""


LISTPACK_VALUE_MAX = 64  # Redis' default hash-max-listpack-value


class Bucketed:
    def __init__(
        self,
        key: Callable[[str, int], str],
        count: int,
        overflow: Callable[[str], str] | None = None,
    ) -> None:
        self.key, self.count, self.overflow = key, count, overflow

    @property
    def reads_all(self) -> int:
        """Replies `queue_hgetall` queues."""
        return self.count + (self.overflow is not None)

    def bucket(self, field: str) -> int:
        return zlib.crc32(field.encode()) % self.count

    def key_of(self, cluster: str, field: str) -> str:
        return self.key(cluster, self.bucket(field))

    def keys(self, cluster: str) -> list[str]:
        spill = [self.overflow(cluster)] if self.overflow is not None else []
        return [self.key(cluster, b) for b in range(self.count)] + spill

    def by_bucket(self, cluster: str, fields: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in fields:
            out.setdefault(self.key_of(cluster, f), []).append(f)
        return out

    def queue_hmget(self, pipe: Any, cluster: str, fields: Iterable[str]) -> Groups:
        """Queue one HMGET per bucket holding some of `fields`; pass the replies (as many as
        groups) to `collect`."""
        unique = list(dict.fromkeys(fields))
        groups = list(self.by_bucket(cluster, unique).items())
        if self.overflow is not None and unique:
            groups.append((self.overflow(cluster), unique))
        for k, names in groups:
            pipe.hmget(k, names)
        return groups

    @staticmethod
    def collect(groups: Groups, replies: list[Any]) -> dict[str, str]:
        """The values `queue_hmget` read (fields without one left out), interned as
        `collect_all`'s are."""
        out: dict[str, str] = {}
        for (_key, names), values in zip(groups, replies, strict=True):
            for f, v in zip(names, values, strict=True):
                if v is not None:
                    out[f] = sys.intern(text(v))
        return out

    def queue_hgetall(self, pipe: Any, cluster: str) -> int:
        """Queue HGETALL of every bucket; returns how many replies `collect_all` takes."""
        for k in self.keys(cluster):
            pipe.hgetall(k)
        return self.reads_all

    @staticmethod
    def collect_all(replies: list[Any]) -> dict[str, str]:
        """The logical hash from `queue_hgetall`'s replies: fields and values as text, interned
        (the per-namespace counts of a cluster repeat a few thousand texts over its namespaces,
        and namespace names repeat over the clusters: a reader that keeps every cluster's counts
        holds each text once), decoded in C (`map`) rather than one call per field."""
        out: dict[str, str] = {}
        for h in replies:
            if h and isinstance(next(iter(h)), bytes):
                out.update(
                    zip(
                        map(sys.intern, map(bytes.decode, h)),
                        map(sys.intern, map(bytes.decode, h.values())),
                        strict=True,
                    )
                )
            else:
                out.update({sys.intern(text(k)): sys.intern(text(v)) for k, v in h.items()})
        return out

    def queue_write(
        self, tx: Any, cluster: str, changed: Mapping[str, str], gone: Iterable[str]
    ) -> None:
        """HSET the changed fields and HDEL the ones gone (and those changed to "")."""
        drop = [*gone, *(f for f, v in changed.items() if not v)]
        kept = [f for f, v in changed.items() if v]
        if self.overflow is not None:
            long = [f for f in kept if len(changed[f].encode()) > LISTPACK_VALUE_MAX]
            short = [f for f in kept if len(changed[f].encode()) <= LISTPACK_VALUE_MAX]
            spill = self.overflow(cluster)
            if drop or short:
                tx.hdel(spill, *drop, *short)  # a value shorter now leaves the overflow
            if long:
                tx.hset(spill, mapping={f: changed[f] for f in long})
            drop, kept = drop + long, short  # ... and one longer now its bucket
        for k, names in self.by_bucket(cluster, drop).items():
            tx.hdel(k, *names)
        for k, names in self.by_bucket(cluster, kept).items():
            tx.hset(k, mapping={f: changed[f] for f in names})
