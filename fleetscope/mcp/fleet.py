"""The API as the MCP server reaches it: GETs of the `/api/v1` read routes, as the caller.

One boundary: every path is built here from validated segments and checked against the read
routes before a request leaves; every client error becomes a ToolError carrying the API's own
message. A token from a file or an exec plugin is obtained again once when the API answers 401
(a long-running server outlives short-lived tokens); nothing here logs or returns a token.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Sequence
from typing import Any, TextIO
from urllib.parse import quote

import anyio.to_thread

from fleetscope.client.config import Target
from fleetscope.client.credentials import ExecToken, TokenFile
from fleetscope.client.errors import (
    BadInput,
    ClientError,
    Refused,
    Unauthenticated,
    Unreachable,
)
from fleetscope.client.features import Features
from fleetscope.client.transport import Api

OPENAPI = "/api/v1/openapi.json"
OBJECTS = "/api/v1/objects"
READ_ROUTES = (OBJECTS, "/api/v1/groups", "/api/v1/status", "/api/v1/access", OPENAPI)
# A path segment as the API's names allow (clusters, DNS-1123 namespaces and names, kind keys,
# `_` for no namespace): never `.`/`..`, a slash, a percent sign or anything to escape.
SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,252}$")
OBJECT_TAILS = ("", "/relations", "/history")
CLUSTER_SCOPED = "_"
Params = Sequence[tuple[str, str]]


class ToolError(Exception):
    """What a tool answers instead of a result: `{"error": code, "message": ...}`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    def as_dict(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


def bad_input(message: str) -> ToolError:
    return ToolError("bad_input", message)


def tool_error(e: ClientError) -> ToolError:
    if isinstance(e, Refused):
        return ToolError("forbidden" if e.label == "forbidden" else "not_found", e.message)
    for kind, code in (
        (BadInput, "bad_input"),
        (Unreachable, "unreachable"),
        (Unauthenticated, "unauthenticated"),
    ):
        if isinstance(e, kind):
            return ToolError(code, e.message)
    return ToolError("server_error", e.message)


def segment(value: Any, what: str) -> str:
    if not isinstance(value, str) or not SEGMENT.fullmatch(value):
        shown = repr(value)[:80]
        raise bad_input(f"{what} {shown} is not a valid name (letters, digits, '.', '-', '_')")
    return quote(value, safe="")


def object_path(cluster: Any, namespace: Any, kind: Any, name: Any, tail: str = "") -> str:
    """`/api/v1/objects/{cluster}/{namespace}/{kind}/{name}{tail}`; "" or `_` as the namespace
    of a cluster-scoped object."""
    if tail not in OBJECT_TAILS:
        raise ValueError(f"not an object route: {tail!r}")
    ns = namespace if namespace not in (None, "") else CLUSTER_SCOPED
    parts = [
        segment(cluster, "cluster"),
        segment(ns, "namespace"),
        segment(kind, "kind"),
        segment(name, "name"),
    ]
    return OBJECTS + "/" + "/".join(parts) + tail


def is_read_route(path: str) -> bool:
    if path in READ_ROUTES:
        return True
    parts = path.split("/")
    # "", api, v1, objects, cluster, namespace, kind, name[, relations | history]
    return (
        path.startswith(OBJECTS + "/")
        and len(parts) in (8, 9)
        and all(SEGMENT.fullmatch(p) for p in parts[4:8])
        and (len(parts) == 8 or "/" + parts[8] in OBJECT_TAILS)
    )


def quiet(target: Target) -> Target:
    """The target for a server whose stdin is the protocol: an exec credential plugin gets no
    terminal (it must not read the assistant's messages)."""
    cred = target.credential
    if isinstance(cred, ExecToken):
        return dataclasses.replace(target, credential=dataclasses.replace(cred, interactive=False))
    return target


class Fleet:
    """The caller's view of the API, shared by every tool (one request at a time)."""

    def __init__(
        self, target: Target, timeout_s: float = 30.0, verbosity: int = 0, log: TextIO | None = None
    ) -> None:
        self._args = (timeout_s, verbosity, log)
        self._lock = threading.Lock()
        self._api = Api(target, *self._args)
        self._features: Features | None = None
        self._doc: dict[str, Any] = {}

    def get(self, path: str, params: Params = ()) -> dict[str, Any]:
        if not is_read_route(path):
            raise ValueError(f"not a read route of the API: {path[:120]!r}")
        with self._lock:
            try:
                try:
                    return self._api.get(path, params)
                except Unauthenticated:
                    if not self._renew():
                        raise
                    return self._api.get(path, params)
            except ClientError as e:
                raise tool_error(e) from e

    async def aget(self, path: str, params: Params = ()) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(lambda: self.get(path, params))

    def features(self) -> Features:
        """What the server offers, from its OpenAPI document: fetched once it answers (while it
        cannot be reached, the basics are assumed and it is asked again next time)."""
        if self._features is not None:
            return self._features
        try:
            doc = self.get(OPENAPI)
        except ToolError as e:
            if e.code not in ("not_found", "forbidden"):
                return Features()
            doc = {}  # an older server, or a proxy that hides it: the basics, for good
        self._doc = doc
        self._features = Features.from_openapi(doc)
        return self._features

    async def afeatures(self) -> Features:
        return await anyio.to_thread.run_sync(self.features)

    def parameters(self, path: str) -> list[dict[str, Any]]:
        """The parameters the server's document declares for GET `path`, as declared (empty
        until the document was read)."""
        item = self._doc.get("paths", {}).get(path)
        found = item.get("get", {}).get("parameters", []) if isinstance(item, dict) else []
        return [p for p in found if isinstance(p, dict) and isinstance(p.get("name"), str)]

    def close(self) -> None:
        self._api.close()

    def _renew(self) -> bool:
        """A token from a file or a plugin, obtained again (it may have expired)."""
        target = self._api.target
        cred = target.credential
        if not isinstance(cred, TokenFile | ExecToken):
            return False
        fresh = dataclasses.replace(cred, _cached="")
        self._api.close()
        self._api = Api(dataclasses.replace(target, credential=fresh), *self._args)
        return True
