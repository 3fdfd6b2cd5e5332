"""`GET /api/v1/objects/{cluster}/{namespace}/{kind}/{name}`: the live object from the leaf.
`_` stands for the namespace of cluster-scoped kinds (GatewayClass).

Only registered clusters and kinds and valid Kubernetes names reach the leaf, and only as a GET
of that one object, read with the collector's credentials plus `Impersonate-User/Group` of the
caller, so the leaf's RBAC decides. Its 403/404 pass through; a timeout is a 504. Clusters
where the caller may list nothing are 404, as if unregistered.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from common.errors import ClusterError, ClusterUnreachable, NotFound, UpstreamError
from common.index import keys
from common.index.rows import decode, is_member, sort_key
from query import params
from query.state import caller, state

bp = Blueprint("detail", __name__, url_prefix="/api/v1")


def _api_version(cluster: str, namespace: str, kind: str, name: str, default: str) -> str:
    """The version the collector saw this object at (what the leaf serves), else the kind's."""
    prefix = sort_key(namespace, kind, name).encode()
    found = state().r.zrangebylex(keys.rows(cluster), b"[" + prefix, b"(" + prefix + b"\xff", 0, 1)
    if found and isinstance(found[0], bytes) and is_member(found[0]):
        return decode(cluster, found[0])["apiVersion"]
    return default


@bp.get("/objects/<cluster>/<namespace>/<kind>/<name>")
def detail(cluster: str, namespace: str, kind: str, name: str) -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, ())
    st = state()
    namespace, k = params.object_path(cluster, namespace, kind, name, st.registry)
    # A cluster where the caller can list nothing answers exactly like an unregistered one:
    # the proxy must not reveal which clusters exist to someone who cannot see them.
    if not st.r.hexists(keys.CLUSTERS, cluster) or cluster not in st.scope(user).access:
        raise NotFound(f"no cluster named {cluster!r} is registered")
    api_version = _api_version(cluster, namespace, kind, name, k.api_version())
    client = st.leaves.client(cluster, st.r.get(keys.VERSION))
    groups = user.groups
    try:
        obj = client.get_object(k, api_version, namespace, name, user.name, groups)
    except ClusterUnreachable as e:
        raise UpstreamError(f"cluster {cluster} is unreachable: {e}") from e
    except ClusterError as e:
        raise UpstreamError(str(e)) from e
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return {"cluster": cluster, "object": obj}
