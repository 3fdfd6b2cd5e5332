"""`fleetscope __complete`: what the completion scripts call (hidden from `--help`).

    __complete kinds|clusters|namespaces|statuses|contexts [connection flags]
    __complete objects CLUSTER/NAMESPACE/KIND/NAME-PREFIX [connection flags]
    __complete words -- WORD...     the command line after `fleetscope`, the last word being
                                    the one under the cursor: prints what may come there

Kinds, clusters and namespaces come from the API as the caller sees them (facets, and the
caller's access for namespaces). Failures print nothing: a shell is waiting.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Iterable

from fleetscope.client import kinds
from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.config import Flags, config_path, load_config
from fleetscope.client.errors import ClientError
from fleetscope.client.features import OBJECTS
from fleetscope.client.listing import SORT_FIELDS
from fleetscope.client.printers import FORMATS
from fleetscope.client.transport import Api

LISTS = ("kinds", "clusters", "namespaces", "statuses", "contexts")
STATUSES = ("healthy", "unhealthy", "progressing", "unknown")
PUBLIC = ("get", "describe", "status", "access", "groups", "completion")
CONNECTION_VALUE_FLAGS = (
    "--config",
    "--context",
    "--server",
    "--certificate-authority",
    "--as",
    "--as-group",
    "--request-timeout",
    "-v",
    "--v",
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=(*LISTS, "objects", "words"))
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _complete(args))


def _complete(args: argparse.Namespace) -> int:
    try:
        if args.what == "words":
            words = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
            found = complete_words(words or [""])
        elif args.what == "objects":
            partial = args.rest[0] if args.rest and not args.rest[0].startswith("-") else ""
            found = objects(_api(args.rest[1:] if partial else args.rest), partial)
        else:
            found = lister(args.what, lambda: _api(args.rest))
    except (ClientError, OSError):
        return 0
    sys.stdout.writelines(f"{c}\n" for c in found)
    return 0


def _api(words: list[str]) -> Api:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_connection_flags(parser)
    try:
        ns, _ = parser.parse_known_args(words)
    except (argparse.ArgumentError, SystemExit):
        raise ClientError("unusable connection flags") from None
    ns.verbosity = 0
    return connect(ns)


def lister(what: str, api: Callable[[], Api]) -> list[str]:
    """One of LISTS; `api` is called only for those that need the server."""
    if what == "kinds":
        return kinds.completions(_facet(api(), "kinds"))
    if what == "clusters":
        return _facet(api(), "clusters")
    if what == "namespaces":
        return namespaces(api())
    if what == "statuses":
        return list(api().features().statuses or STATUSES)
    return contexts()


def _facet(api: Api, name: str, params: list[tuple[str, str]] | None = None) -> list[str]:
    counts = api.get("/api/v1/facets", params or []).get(name) or {}
    return sorted(str(k) for k in counts) if isinstance(counts, dict) else []


def namespaces(api: Api, cluster: str = "") -> list[str]:
    """The facets' namespaces where the server counts them; else those the caller's bindings
    name (cluster-wide access names none; there, namespaces of the first page of objects)."""
    params = [("cluster", cluster)] if cluster else []
    if "namespaces" in api.features().facet_fields:
        return _facet(api, "namespaces", params)
    found: set[str] = set()
    for c in api.get("/api/v1/access").get("clusters") or []:
        if isinstance(c, dict) and (not cluster or c.get("cluster") == cluster):
            found |= {str(ns) for ns in c.get("namespaces") or {}}
            found |= {str(g["namespace"]) for g in c.get("grants") or [] if g.get("namespace")}
    found.discard("*")
    if not found:
        page = api.get(OBJECTS, [*params, ("limit", "500")])
        # `_` is the namespace of cluster-scoped objects in paths and the namespace filter.
        found = {str(r.get("namespace") or "_") for r in page.get("items") or []}
    return sorted(found)


def contexts() -> list[str]:
    path, explicit = config_path(Flags(), os.environ)
    return [c.name for c in load_config(path, explicit).contexts]


def objects(api: Api, partial: str) -> list[str]:
    """`describe` arguments, one path segment at a time: `c/`, `c/ns/`, `c/ns/Kind/`, names."""
    parts = partial.split("/")
    if len(parts) == 1:
        return [f"{c}/" for c in _facet(api, "clusters")]
    cluster = parts[0]
    if len(parts) == 2:
        return [f"{cluster}/{ns}/" for ns in namespaces(api, cluster)]
    ns = parts[1]
    if len(parts) == 3:
        scope = [("cluster", cluster), ("namespace", ns)]
        return [f"{cluster}/{ns}/{k}/" for k in _facet(api, "kinds", scope)]
    query = [("cluster", cluster), ("namespace", ns), ("kind", parts[2]), ("limit", "500")]
    if parts[3]:
        query.append(("name", parts[3].lower()))
    items = api.get(OBJECTS, query).get("items") or []
    return [f"{cluster}/{ns}/{parts[2]}/{r['name']}" for r in items if isinstance(r, dict)]


def complete_words(words: list[str]) -> list[str]:
    """What may come at the last word of `words` (the command line after `fleetscope`)."""
    cur, before = words[-1], words[:-1]
    sub = next((w for w in before if not w.startswith("-")), "")

    def api() -> Api:  # built only when a candidate list needs the server
        return _api(before)

    if not sub:
        return _prefixed(PUBLIC, cur)
    prev = before[-1] if before and before[-1] != sub else ""
    if prev:
        value = _flag_value(prev, sub, api)
        if value is not None:
            return _prefixed(value, cur)
    if cur.startswith("-"):
        return _prefixed(_flags_of(sub), cur)
    if sub in ("get", "groups"):
        head, _, last = cur.rpartition(",")
        lead = head + "," if head else ""
        return [lead + k for k in lister("kinds", api) if k.startswith(last.lower())]
    if sub == "describe":
        return [o for o in objects(api(), cur) if o.startswith(cur)]
    if sub == "completion":
        return _prefixed(("bash", "zsh"), cur)
    return []


def _flag_value(flag: str, sub: str, api: Callable[[], Api]) -> list[str] | None:
    """Candidates for the value of `flag`; None when `flag` takes no value."""
    by_flag: dict[str, Callable[[], list[str]]] = {
        "--cluster": lambda: lister("clusters", api),
        "-n": lambda: lister("namespaces", api),
        "--namespace": lambda: lister("namespaces", api),
        "--status": lambda: lister("statuses", api),
        "--context": contexts,
        "--sort-by": lambda: list(SORT_FIELDS),
        "-o": lambda: _formats(sub),
        "--output": lambda: _formats(sub),
    }
    if flag in by_flag:
        return by_flag[flag]()
    if flag in CONNECTION_VALUE_FLAGS or flag in ("--name", "--limit", "--chunk-size", "--depth"):
        return []  # a free value: nothing to offer
    return None


def _formats(sub: str) -> list[str]:
    return {"get": [*FORMATS, "csv"], "describe": ["yaml", "json"]}.get(
        sub, ["table", "json", "yaml"]
    )


def _flags_of(sub: str) -> list[str]:
    """The long flags of a client subcommand, from its own argument definitions."""
    if sub not in PUBLIC:
        return []
    parser = argparse.ArgumentParser(add_help=False)
    importlib.import_module(f"fleetscope.client.{sub}").configure(parser)
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def _prefixed(values: Iterable[str], cur: str) -> list[str]:
    return [v for v in values if v.startswith(cur)]
