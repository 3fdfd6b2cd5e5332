"""The index's Redis topology, from the scheme of `FLEETSCOPE_REDIS_URL`.

- `redis://`, `rediss://`, `unix://`: one standalone server (redis-py's own URL form).
- `redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB][?OPTIONS]`
  (`rediss+sentinel://` with TLS): the primary a set of Sentinels names, found again after a
  failover. The user and password are the data nodes'; options: `sentinel_password` (when the
  Sentinels require one of their own), `ssl_cert_reqs` (`none` | `optional` | `required`),
  `ssl_ca_certs` (a CA bundle's path).
- `redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...][/0][?OPTIONS]`
  (`rediss+cluster://` with TLS): a Redis Cluster (self-hosted, ElastiCache cluster mode,
  Memorystore cluster); the hosts are seed nodes, the rest of the cluster is discovered from
  them. A cluster has database 0 only; options: `ssl_cert_reqs`, `ssl_ca_certs`.

Nothing here connects; errors never repeat a password.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

from common.errors import ConfigError

STANDALONE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")  # plain, TLS
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_OPTIONS = ("sentinel_password", "ssl_cert_reqs", "ssl_ca_certs")
CLUSTER_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs")
_CERT_REQS = ("none", "optional", "required")
_HOST_PORT = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+)):([0-9]{1,5})$")


def scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def redact(url: str) -> str:
    """`url` with any password replaced by `***` (for messages and logs)."""
    if "://" not in url:
        return url
    head, rest = url.split("://", 1)
    auth, sep, tail = rest.rpartition("@")
    if sep and ":" in auth:
        auth = auth.split(":", 1)[0] + ":***"
    rest = f"{auth}{sep}{tail}" if sep else rest
    return f"{head}://" + re.sub(r"(sentinel_password=)[^&]*", r"\1***", rest)


@dataclass(frozen=True)
class SentinelURL:
    """A parsed `redis+sentinel://` URL."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    sentinel_password: str | None = field(default=None, repr=False)
    ssl_cert_reqs: str = "required"
    ssl_ca_certs: str | None = None


@dataclass(frozen=True)
class ClusterURL:
    """A parsed `redis+cluster://` URL."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ssl_cert_reqs: str = "required"
    ssl_ca_certs: str | None = None


@dataclass(frozen=True)
class _Parts:
    where: str
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    path: list[str]
    username: str | None
    password: str | None
    options: dict[str, str]


def _split(
    url: str, variable: str, schemes: tuple[str, str], what: str, known: tuple[str, ...]
) -> _Parts:
    """The parts every multi-host URL shares: credentials, HOST:PORT list, path, options
    (`schemes`: the plain and the TLS one; `what`: the hosts' role, for messages)."""
    where = f"{variable} ({redact(url)})"
    if scheme(url) not in schemes:
        raise ConfigError(f"{where}: not a {schemes[0]}:// URL")
    rest = url.split("://", 1)[1]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    auth, sep, hosts = netloc.rpartition("@")
    username = password = None
    if sep:
        user, _, pw = auth.partition(":")
        username = urllib.parse.unquote(user) or None
        password = urllib.parse.unquote(pw) or None
    found = []
    for part in hosts.split(","):
        m = _HOST_PORT.fullmatch(part)
        if not m or not 0 < int(m.group(3)) < 65536:
            raise ConfigError(f"{where}: {part!r} is not a {what} HOST:PORT")
        found.append((m.group(1) or m.group(2), int(m.group(3))))
    segments = [urllib.parse.unquote(s) for s in path.split("/")] if path else []
    options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"{where}: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    if options.get("ssl_cert_reqs", "required") not in _CERT_REQS:
        raise ConfigError(f"{where}: ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}")
    tls = scheme(url) == schemes[1]
    return _Parts(where, tls, tuple(found), segments, username, password, options)


def parse_sentinel(url: str, variable: str = "FLEETSCOPE_REDIS_URL") -> SentinelURL:
    """The Sentinel URL's parts; a ConfigError saying what is wrong otherwise."""
    p = _split(url, variable, SENTINEL_SCHEMES, "Sentinel", SENTINEL_OPTIONS)
    where, segments = p.where, p.path
    if not segments or not segments[0] or len(segments) > 2:
        raise ConfigError(f"{where}: the path must be /MASTER_NAME or /MASTER_NAME/DB")
    db = 0
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise ConfigError(f"{where}: the database {segments[1]!r} is not a number")
        db = int(segments[1])
    return SentinelURL(
        p.hosts,
        segments[0],
        db,
        p.username,
        p.password,
        p.tls,
        p.options.get("sentinel_password") or None,
        p.options.get("ssl_cert_reqs", "required"),
        p.options.get("ssl_ca_certs") or None,
    )


def parse_cluster(url: str, variable: str = "FLEETSCOPE_REDIS_URL") -> ClusterURL:
    """The Redis Cluster URL's parts; a ConfigError saying what is wrong otherwise."""
    p = _split(url, variable, CLUSTER_SCHEMES, "cluster node", CLUSTER_OPTIONS)
    if p.path not in ([], [""], ["0"]):
        raise ConfigError(f"{p.where}: a Redis Cluster has database 0 only (no path, or /0)")
    return ClusterURL(
        p.hosts,
        p.username,
        p.password,
        p.tls,
        p.options.get("ssl_cert_reqs", "required"),
        p.options.get("ssl_ca_certs") or None,
    )


def check(url: str, variable: str = "FLEETSCOPE_REDIS_URL") -> str:
    """The topology of `url` (`standalone`, `sentinel` or `cluster`); a ConfigError for anything
    else."""
    sch = scheme(url)
    if sch in STANDALONE_SCHEMES:
        return "standalone"
    if sch in SENTINEL_SCHEMES:
        parse_sentinel(url, variable)
        return "sentinel"
    if sch in CLUSTER_SCHEMES:
        parse_cluster(url, variable)
        return "cluster"
    raise ConfigError(  # the value is not quoted: it may be a password put in the wrong place
        f"{variable} must start with redis://, rediss://, unix://, redis+sentinel:// "
        "(rediss+sentinel://) or redis+cluster:// (rediss+cluster://)"
    )
