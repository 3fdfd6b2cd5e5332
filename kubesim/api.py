"""The Kubernetes API of one simulated cluster: routing, authorization, list/get/watch/write.

`handle(cluster, request)` is the whole request path: fault injection, authentication,
impersonation, discovery, then the resource verbs with kube-apiserver's semantics (paged lists
with continue tokens, 410 `Expired`, watches streamed as JSON lines, Status errors).
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.rbac.authorizer import UserInfo
from kubesim import table
from kubesim.auth import forbidden
from kubesim.catalog import Resource
from kubesim.errors import KubeError
from kubesim.http import Request, Response
from kubesim.patch import apply_patch
from kubesim.selectors import parse_fields, parse_labels, raw_matcher
from kubesim.store import Key

if TYPE_CHECKING:
    from kubesim.cluster import SimCluster

VERSION_INFO = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}
NAMESPACE_SUBRESOURCES = ("status", "finalize")
MAX_WATCH_S = 1800.0


@dataclass
class Target:
    """What a resource request addresses (kube-apiserver's RequestInfo)."""

    res: Resource
    namespace: str
    name: str
    sub: str
    verb: str


def json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(status, body, headers=headers or {})


async def handle(cluster: SimCluster, req: Request) -> Response:
    """Answer one request; every request is logged in the cluster's request log."""
    info: dict[str, Any] = {"user": "", "verb": "", "resource": "", "namespace": "", "items": 0}
    try:
        resp = await _handle(cluster, req, info)
    except KubeError as e:
        resp = json_response(e.code, e.body(), e.headers)
    cluster.record(req, resp.status, info)
    return resp


async def _handle(cluster: SimCluster, req: Request, info: dict[str, Any]) -> Response:
    fault = cluster.fault
    if fault.latency_s > 0:
        await asyncio.sleep(fault.latency_s)
    injected = fault.injected_error(cluster.rng)
    if injected is not None:
        raise injected
    user = cluster.tokens.authenticate(req)
    info["user"] = user.name
    if req.path in ("/healthz", "/livez", "/readyz"):
        return Response(200, b"ok", "text/plain")
    cluster.store  # noqa: B018 -- load the cluster first: manifests may add served types
    acting = cluster.authz.impersonate(req, user)
    if req.path == "/version" or req.path == "/version/":
        return json_response(200, json.dumps(VERSION_INFO).encode())
    doc = cluster.catalog.doc(req.path)
    if doc is not None:
        return json_response(200, doc)
    target = parse_target(cluster, req)
    info.update(verb=target.verb, resource=target.res.resource, namespace=target.namespace)
    gate(cluster, acting, target)
    if target.verb == "list":
        return list_objects(cluster, req, target, info)
    if target.verb == "watch":
        return watch_objects(cluster, req, target)
    if target.verb == "get":
        return get_object(cluster, req, target)
    return write_object(cluster, req, target)


def parse_target(cluster: SimCluster, req: Request) -> Target:
    parts = [p for p in req.path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise KubeError.path_not_found(req.path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    res = cluster.catalog.for_api(group, version, rest[0])
    if res is None or len(rest) > 3:
        raise KubeError.path_not_found(req.path)
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if res.namespaced and name and not namespace:
        raise KubeError.path_not_found(req.path)
    return Target(res, namespace, name, sub, _verb(req, name))


def _verb(req: Request, name: str) -> str:
    method = req.method
    if method == "GET":
        if req.query.get("watch", "") in ("1", "true", "True"):
            return "watch"
        return "get" if name else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method not in verbs or (method == "POST" and name) or (method != "POST" and not name):
        raise KubeError.method_not_allowed(method)
    return verbs[method]


def gate(cluster: SimCluster, user: UserInfo, t: Target) -> None:
    ns = t.namespace or None
    if t.res.plural == "namespaces" and t.name:
        ns = t.name  # a namespace's own object is also governed by RoleBindings inside it
        allowed = cluster.authz.allowed
        if not allowed(user, t.verb, "", "namespaces", None, t.name, t.sub) and not allowed(
            user, t.verb, "", "namespaces", ns, t.name, t.sub
        ):
            raise forbidden(user, t.verb, "", "namespaces", "", t.name)
        return
    res = t.res
    if not cluster.authz.allowed(user, t.verb, res.group, res.plural, ns, t.name, t.sub):
        plural = f"{res.plural}/{t.sub}" if t.sub else res.plural
        raise forbidden(user, t.verb, res.group, plural, t.namespace, t.name)


# -- reads --------------------------------------------------------------------------------


def encode_continue(rv: int, key: Key) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}\x00"}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        ns, _, name = str(data["start"]).rstrip("\x00").rpartition("/")
        return int(data["rv"]), (ns, name)
    except (ValueError, KeyError, TypeError) as e:
        raise KubeError.bad_request("continue key is not valid: invalid continue token") from e


EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter."
)


def list_objects(cluster: SimCluster, req: Request, t: Target, info: dict[str, Any]) -> Response:
    store = cluster.store
    try:
        limit = max(0, int(req.query.get("limit") or 0))
    except ValueError as e:
        raise KubeError.bad_request("limit must be an integer") from e
    after: Key | None = None
    rv = store.rv
    token = req.query.get("continue", "")
    if token:
        rv, after = decode_continue(token)
        if cluster.fault.expire_continue or rv < store.compacted_rv:
            raise KubeError.expired(EXPIRED_CONTINUE)
    match = raw_matcher(req.query.get("labelSelector", ""), req.query.get("fieldSelector", ""))
    raws, last = store.page(t.res, t.namespace, after, limit, match)
    info["items"] = len(raws)
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if last is not None:
        meta["continue"] = encode_continue(rv, last)
    if table.wants_table(req.header("accept")):
        body = table.render(t.res, raws, meta, req.query.get("includeObject", "Metadata"))
        return Response(200, body, table.TABLE_CONTENT_TYPE)
    head = {"kind": t.res.kind + "List", "apiVersion": t.res.api_version, "metadata": meta}
    prefix = json.dumps(head, separators=(",", ":")).encode()[:-1]
    return json_response(200, prefix + b',"items":[' + b",".join(raws) + b"]}")


def get_object(cluster: SimCluster, req: Request, t: Target) -> Response:
    if t.sub and not (t.sub == "status" and t.res.has_status):
        raise KubeError.path_not_found(req.path)
    raw = cluster.store.get_raw(t.res, t.namespace, t.name)
    if raw is None:
        raise KubeError.not_found(t.res, t.name)
    if table.wants_table(req.header("accept")):
        meta = {"resourceVersion": str(cluster.store.rv)}
        body = table.render(t.res, [raw], meta, req.query.get("includeObject", "Metadata"))
        return Response(200, body, table.TABLE_CONTENT_TYPE)
    return json_response(200, raw)


def watch_objects(cluster: SimCluster, req: Request, t: Target) -> Response:
    store = cluster.store
    labels = parse_labels(req.query.get("labelSelector", ""))
    fields = parse_fields(req.query.get("fieldSelector", ""))
    if t.name:
        t = Target(t.res, t.namespace, "", t.sub, t.verb)
        prev = fields
        name = req.path.rstrip("/").rsplit("/", 1)[1]
        fields = lambda meta: meta.get("name") == name and (prev is None or prev(meta))  # noqa: E731
    try:
        timeout = min(float(req.query.get("timeoutSeconds") or MAX_WATCH_S), MAX_WATCH_S)
    except ValueError as e:
        raise KubeError.bad_request("timeoutSeconds must be a number") from e
    from kubesim.watch import WatchStream

    stream = WatchStream(
        cluster,
        store,
        t.res,
        t.namespace,
        labels,
        fields,
        req.query.get("resourceVersion", ""),
        req.query.get("allowWatchBookmarks", "") in ("1", "true"),
        req.query.get("sendInitialEvents", "") in ("1", "true"),
        timeout,
        req,
    )
    return Response(200, stream=stream.run())


# -- writes -------------------------------------------------------------------------------


def _body(req: Request) -> dict[str, Any]:
    try:
        obj = json.loads(req.body or b"{}")
    except ValueError:
        import yaml

        try:
            obj = yaml.safe_load(req.body)
        except yaml.YAMLError as e:
            raise KubeError.bad_request(f"the request body is neither JSON nor YAML: {e}") from e
    if not isinstance(obj, dict):
        raise KubeError.bad_request("the request body must be an object")
    return obj


def write_object(cluster: SimCluster, req: Request, t: Target) -> Response:
    store, res = cluster.store, t.res
    if req.query.get("dryRun"):
        raise KubeError.bad_request("kubesim does not support dryRun")
    if t.verb == "create":
        return json_response(201, _dump(store.create(res, t.namespace, _body(req))))
    if t.verb == "update":
        obj = store.replace(res, t.namespace, t.name, _body(req), t.sub)
        return json_response(200, _dump(obj))
    if t.verb == "patch":
        ctype = req.header("content-type", "application/merge-patch+json")
        obj = store.patch(
            res, t.namespace, t.name, lambda doc: apply_patch(ctype, doc, req.body), t.sub
        )
        return json_response(200, _dump(obj))
    return json_response(200, _dump(store.delete(res, t.namespace, t.name)))


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
