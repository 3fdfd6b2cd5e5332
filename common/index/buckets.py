"""One logical hash stored as a fixed number of small hashes, chosen by CRC32 of the field.

Redis keeps a hash of up to 128 short fields as a listpack (a few bytes of overhead a field)
and a bigger one as a hash table (~60 bytes more a field). The per-cluster hashes with one
entry per namespace or per depended-on node hold thousands of fields, so they are spread over
`count` hashes of the cluster (same hash tag: still one slot, one MULTI/EXEC): ~30 bytes a field
instead of ~90. Reads of a few fields cost one HMGET per bucket touched, in the caller's pipeline.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from common.redis_client import text

Groups = list[tuple[str, list[str]]]
"""(bucket key, fields) per HMGET queued, in order."""


class Bucketed:
    def __init__(self, key: Callable[[str, int], str], count: int) -> None:
        self.key, self.count = key, count

    def bucket(self, field: str) -> int:
        return zlib.crc32(field.encode()) % self.count

    def key_of(self, cluster: str, field: str) -> str:
        return self.key(cluster, self.bucket(field))

    def keys(self, cluster: str) -> list[str]:
        return [self.key(cluster, b) for b in range(self.count)]

    def by_bucket(self, cluster: str, fields: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in fields:
            out.setdefault(self.key_of(cluster, f), []).append(f)
        return out

    def queue_hmget(self, pipe: Any, cluster: str, fields: Iterable[str]) -> Groups:
        """Queue one HMGET per bucket holding some of `fields`; pass the replies (as many as
        groups) to `collect`."""
        groups = list(self.by_bucket(cluster, dict.fromkeys(fields)).items())
        for k, names in groups:
            pipe.hmget(k, names)
        return groups

    @staticmethod
    def collect(groups: Groups, replies: list[Any]) -> dict[str, str]:
        """The values `queue_hmget` read (fields without one left out)."""
        out: dict[str, str] = {}
        for (_key, names), values in zip(groups, replies, strict=True):
            for f, v in zip(names, values, strict=True):
                if v is not None:
                    out[f] = text(v)
        return out

    def queue_hgetall(self, pipe: Any, cluster: str) -> int:
        """Queue HGETALL of every bucket; returns how many replies `collect_all` takes."""
        for k in self.keys(cluster):
            pipe.hgetall(k)
        return self.count

    @staticmethod
    def collect_all(replies: list[Any]) -> dict[str, str]:
        return {text(k): text(v) for h in replies for k, v in h.items()}

    def queue_write(
        self, tx: Any, cluster: str, changed: Mapping[str, str], gone: Iterable[str]
    ) -> None:
        """HSET the changed fields and HDEL the ones gone (and those changed to "")."""
        drop = [*gone, *(f for f, v in changed.items() if not v)]
        for k, names in self.by_bucket(cluster, drop).items():
            tx.hdel(k, *names)
        kept = (f for f, v in changed.items() if v)
        for k, names in self.by_bucket(cluster, kept).items():
            tx.hset(k, mapping={f: changed[f] for f in names})
