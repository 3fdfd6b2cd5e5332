"""Lists as the API serves them: filters from the flags (adapted to what the server offers),
and pages followed lazily through continue tokens, up to a total limit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fleetscope.client import kinds
from fleetscope.client.errors import BadInput, ClientError
from fleetscope.client.features import OBJECTS, Features
from fleetscope.client.transport import Api, Params

MAX_CHUNK, DEFAULT_CHUNK = 500, 500
SORT_FIELDS = ("lastTransitionTime", "-lastTransitionTime")


def add_filter_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kinds",
        nargs="*",
        metavar="KIND",
        help="kinds, plurals or short names (ks, hr, vs, dr, gw ...); "
        "comma-separated or several; default: every kind",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (the default: a fleet has no current namespace)",
    )
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="only this namespace (repeatable or comma-separated)",
    )
    parser.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="CLUSTER",
        help="only this cluster (repeatable or comma-separated)",
    )
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="STATUS",
        help="only this status: healthy, unhealthy, progressing, unknown ... "
        "(repeatable or comma-separated)",
    )
    parser.add_argument("--name", metavar="SUBSTRING", help="name contains this (any case)")
    parser.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="label selector, as kubectl takes it: -l 'app.kubernetes.io/name=web', "
        "'tier in (web,api)', '!canary', comma = AND",
    )
    parser.add_argument(
        "--suspended",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only suspended objects (--no-suspended: only those not suspended)",
    )


def split(values: list[str]) -> list[str]:
    return [v.strip() for raw in values for v in raw.split(",") if v.strip()]


def filter_params(args: argparse.Namespace, api: Api, path: str = OBJECTS) -> list[tuple[str, str]]:
    """Query parameters for the list filters; kinds and suspension as this server takes them."""
    params: list[tuple[str, str]] = []
    if args.kinds:
        params.append(("kind", ",".join(kinds.resolve(args.kinds, api.features().kinds))))
    for name, values in (("cluster", args.cluster), ("namespace", args.namespace)):
        if split(values):
            params.append((name, ",".join(split(values))))
    statuses = split(args.status)
    extra: list[tuple[str, str]] = []
    if args.suspended is not None:
        statuses, extra = suspension(args.suspended, statuses, api.features(), path)
    if statuses:
        params.append(("status", ",".join(statuses)))
    if args.name:
        params.append(("name", args.name))
    selector = getattr(args, "selector", None)
    if selector:
        if not api.features().has_param(path, "labelSelector"):
            raise BadInput("this fleetscope server has no label selectors (-l); upgrade it")
        params.append(("labelSelector", selector))
    return params + extra


def suspension(
    wanted: bool, statuses: list[str], features: Features, path: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """`--suspended`: a `suspended` filter where the server has one; else (older servers, where
    suspension is a status) the statuses that mean it."""
    if features.has_param(path, "suspended"):
        return statuses, [("suspended", "true" if wanted else "false")]
    offered = features.enum("status", path) or ("suspended",)
    if "suspended" not in offered:
        raise BadInput("this server cannot filter on suspension")
    if wanted:
        if statuses and "suspended" not in statuses:
            raise BadInput(
                "this server reports suspension as a status, so --suspended cannot "
                "be combined with --status " + ",".join(statuses)
            )
        return ["suspended"], []
    if not features.enum("status", path):
        raise BadInput("--no-suspended needs the server's list of statuses (its OpenAPI document)")
    kept = [s for s in (statuses or offered) if s != "suspended"]
    if not kept:
        raise BadInput("--no-suspended with --status suspended selects nothing")
    return kept, []


def sort_param(value: str | None, features: Features) -> list[tuple[str, str]]:
    if not value:
        return []
    if not features.has_param(OBJECTS, "sort"):
        raise BadInput("this server does not support sorting (no `sort` parameter)")
    field = value if not value.lstrip("-").startswith(".") else value.replace(".", "", 1)
    accepted = features.enum("sort") or SORT_FIELDS
    if field not in accepted:
        raise BadInput(f"--sort-by {value!r}: this server sorts by {', '.join(accepted)}")
    return [("sort", field)]


@dataclass
class Page:
    items: list[dict[str, Any]]
    freshness: dict[str, Any]
    resource_version: str = ""
    """The fleet position the page was read at (`get -w` watches from the first page's)."""


def pages(
    api: Api, path: str, params: Params, chunk: int, limit: int | None = None
) -> Iterator[Page]:
    """Pages of `path`, fetched one at a time as the caller consumes them; at most `limit`
    items in all (None: every item)."""
    left = limit
    token = ""
    while left is None or left > 0:
        size = chunk if left is None else min(chunk, left)
        query = [*params, ("limit", str(size))] + ([("continue", token)] if token else [])
        body = api.get(path, query)
        items = [i for i in body.get("items") or [] if isinstance(i, dict)]
        if left is not None:
            items = items[:left]
            left -= len(items)
        yield Page(items, body.get("freshness") or {}, str(body.get("resourceVersion") or ""))
        after = body.get("continue")
        if not after:
            return
        if after == token:
            raise ClientError("the server sent the same continue token twice; stopping")
        token = str(after)


def warn_degraded(freshness: dict[str, Any]) -> None:
    """Say on stderr (once per command) when the answer may be incomplete."""
    if freshness.get("degraded"):
        message = freshness.get("message") or f"the index is {freshness.get('state')}"
        print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)


def check_chunk(value: str) -> int:
    n = _positive(value, "--chunk-size")
    if n > MAX_CHUNK:
        raise argparse.ArgumentTypeError(
            f"--chunk-size is at most {MAX_CHUNK} (the API's page limit)"
        )
    return n


def check_limit(value: str) -> int:
    return _positive(value, "--limit")


def _positive(value: str, flag: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{flag} must be a positive integer")
    return int(value)
