"""Leaf-cluster access: the client of a leaf cluster's Kubernetes API (the watcher's asyncio
streams, common.leaf.async_watch, send this client's requests with its credentials; nothing else
talks to a leaf).

`ClusterConfig` wraps one kubeconfig; the `kubernetes` client's own loader turns it into host,
CA, client certificate and bearer token. A kubeconfig not written by the operator (a registry
source's) is checked first by common.leaf.credentials: inline material only, so the loader never
runs a command or reads a file for it. Exec plugins, where allowed, run through
common.leaf.exec_plugin (scrubbed environment, timeout), never the client's own. `LeafClient`
then sends raw HTTP through the client's urllib3 pool and parses raw JSON (typed models are far
too slow at fleet scale). Credentials never reach logs, errors, reprs or Redis.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

import orjson
import urllib3
from kubernetes.client import Configuration
from kubernetes.client.rest import RESTClientObject, should_bypass_proxies
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader

from common.errors import (
    ClusterError,
    ClusterUnreachable,
    Forbidden,
    NotFound,
    UpstreamError,
    UpstreamTimeout,
)
from common.kinds.registry import Kind, KindRegistry
from common.leaf import credentials, exec_plugin

log = logging.getLogger(__name__)
T = TypeVar("T")
# Where the kubeconfig loader leaves the bearer token ("Bearer ..."): api_key["authorization"]
# up to kubernetes 36.0.0, api_key["BearerToken"] from 36.0.1 on. Read both: reading one only
# sent no Authorization header at all with the other versions.
TOKEN_KEYS = ("BearerToken", "authorization")
ERROR_TEXT_MAX = 200
MAX_RELISTS = 3
RETRY_AFTER_MAX_S = 300.0
LIST_AUTH_TTL_S = 1.0
"""How long discovery and list requests reuse the credential header: reading it runs the loader's refresh hook,
which re-reads the proxy environment each time (a fifth of a request's CPU); tokens are renewed
at least 30 s before they expire (the loader's and common.leaf.exec_plugin's margins)."""
OPERATOR_SOURCES = ("dir",)  # written by the operator: exec plugins and file paths allowed


def _temp_files_one_at_a_time() -> None:
    """The kubernetes loader writes a kubeconfig's certificate data (CA, client certificate and
    key) to a temp file that it remembers by content, and remembers the file's name before it
    writes the content: a second thread loading the same data at that moment got the name of a
    still empty file, and its TLS context failed (`NO_CERTIFICATE_OR_CRL_FOUND`). A watcher
    loads its clusters' kubeconfigs on several threads (exec plugins on their own), so the
    loader's temp files are made one at a time in this process."""
    create = kube_config._create_temp_file_with_content
    if getattr(create, "one_at_a_time", False):
        return
    lock = threading.Lock()

    def one_at_a_time(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return create(*args, **kwargs)  # type: ignore[no-untyped-call]

    one_at_a_time.one_at_a_time = True  # type: ignore[attr-defined]
    kube_config._create_temp_file_with_content = one_at_a_time


_temp_files_one_at_a_time()


@dataclass(frozen=True, repr=False)
class ClusterConfig:
    """One leaf cluster's kubeconfig. `origin` says where it came from (a path or a Secret).

    `operator`: written by the operator or by fleetscope itself (the kubeconfig directory, Argo
    CD's in-cluster entry), so it may run exec plugins and name files; otherwise only inline
    material loads, and an exec plugin only when its command is in `exec_commands`."""

    name: str
    source: str  # dir | secret | gitopscluster | capi | argocd
    origin: str
    kubeconfig: dict[str, Any] = field(compare=False)
    base_path: str = ""
    operator: bool = False
    exec_commands: tuple[str, ...] = ()
    exec_timeout_s: float = 30.0
    _loaded: list[Configuration] = field(default_factory=list, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False)

    def __post_init__(self) -> None:
        if self.source in OPERATOR_SOURCES:
            object.__setattr__(self, "operator", True)

    @property
    def loaded(self) -> bool:
        """Whether `configuration()` has run (it answers at once from now on)."""
        return bool(self._loaded)

    @property
    def runs_plugin(self) -> bool:
        """Whether loading runs an exec plugin (may take up to `exec_timeout_s`)."""
        return _without_exec(self.kubeconfig)[1] is not None

    def refused(self) -> str:
        """Why this kubeconfig must not be loaded here ("" when it may)."""
        if self.operator:
            return ""
        return credentials.check(self.kubeconfig, self.exec_commands)

    def __repr__(self) -> str:
        return f"ClusterConfig(name={self.name!r}, source={self.source!r}, server={self.server!r})"

    def _cluster_field(self, key: str) -> str:
        """A field of the current context's cluster entry ("" if absent or malformed)."""
        try:
            ctx_name = self.kubeconfig.get("current-context")
            ctx = _named(self.kubeconfig.get("contexts"), ctx_name)
            cluster = _named(self.kubeconfig.get("clusters"), ctx.get("context", {}).get("cluster"))
            value = cluster.get("cluster", {}).get(key, "")
        except (AttributeError, TypeError):
            return ""
        return value if isinstance(value, str) else ""

    @property
    def server(self) -> str:
        """The API server URL of the current context (not a credential)."""
        return self._cluster_field("server")

    def configuration(self) -> Configuration:
        """The kubernetes client Configuration (loaded once; the token refreshes itself)."""
        with self._lock:
            if not self._loaded:
                self._loaded.append(self._load())
            return self._loaded[0]

    def _load(self) -> Configuration:
        refused = self.refused()
        if refused:  # checked again here, whoever built this config: nothing runs, nothing read
            raise ClusterError(f"cluster {self.name}: {refused}")
        config = Configuration()
        kubeconfig, plugin = _without_exec(self.kubeconfig)
        try:
            loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
                kubeconfig, config_base_path=self.base_path or None
            )
            loader.load_and_set(config)  # type: ignore[no-untyped-call]
        except (ConfigException, KeyError, TypeError, ValueError, OSError) as e:
            raise ClusterError(
                f"cluster {self.name}: kubeconfig from {self.origin} is unusable "
                f"({type(e).__name__}: {_cut(str(e))})"
            ) from None  # the loader's exception may carry config contents: do not chain
        if not getattr(config, "proxy", None):  # the kubernetes client reads it from 30 on only
            config.proxy = self._cluster_field("proxy-url") or None
        if plugin is not None:
            _ExecAuth(self, plugin).attach(config)
        if not config.verify_ssl:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            log.warning("TLS verification is off for this cluster", extra={"cluster": self.name})
        return config


def _without_exec(kubeconfig: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The kubeconfig without its users' `exec` (run by common.leaf.exec_plugin instead of the
    client's ExecProvider), and the current user's plugin spec."""
    users = kubeconfig.get("users") if isinstance(kubeconfig, dict) else None
    if not isinstance(users, list) or not any(
        isinstance(u, dict) and isinstance(u.get("user"), dict) and "exec" in u["user"]
        for u in users
    ):
        return kubeconfig, None
    copied = copy.deepcopy(kubeconfig)
    plugins: dict[Any, dict[str, Any]] = {}
    for entry in copied["users"]:
        if isinstance(entry, dict) and isinstance(entry.get("user"), dict):
            spec = entry["user"].pop("exec", None)
            if isinstance(spec, dict):
                plugins[entry.get("name")] = spec
    try:
        ctx = _named(copied.get("contexts"), copied.get("current-context"))
        user = ctx.get("context", {}).get("user")
    except AttributeError:
        user = None
    current = _named(copied.get("users"), user).get("user") or {}
    if isinstance(current, dict) and {"auth-provider", "token", "tokenFile"} & set(current):
        return copied, None  # the client's precedence: these win over exec, which never runs
    return copied, plugins.get(user)


class _ExecAuth:
    """An exec plugin's credential on a loaded Configuration: a token (re-run when it expires,
    by whichever request needs it, under this cluster's own lock) or a client certificate."""

    def __init__(self, cluster: ClusterConfig, spec: dict[str, Any]) -> None:
        self.cluster, self.spec = cluster, spec
        self.lock = threading.Lock()
        self.credential = self._run()

    def _run(self) -> exec_plugin.Credential:
        c = self.cluster
        return exec_plugin.run(self.spec, c.name, c.exec_timeout_s, c.base_path)

    def attach(self, config: Configuration) -> None:
        cred = self.credential
        if cred.token:
            config.api_key["BearerToken"] = f"Bearer {cred.token}"
            config.api_key.pop("authorization", None)
            if cred.expires_at is not None:
                config.refresh_api_key_hook = self._refresh  # type: ignore[assignment]
            return
        config.cert_file = _private_file(cred.cert_pem)
        config.key_file = _private_file(cred.key_pem)

    def _refresh(self, config: Configuration) -> None:
        with self.lock:
            if self.credential.expired():
                self.credential = self._run()
        config.api_key["BearerToken"] = f"Bearer {self.credential.token}"


def _private_file(content: str) -> str:
    """A file only this user can read, holding a plugin's PEM (ssl wants paths)."""
    fd, path = tempfile.mkstemp(prefix="fleetscope-exec-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(content)
    return path


def proxy_settings(config: Configuration) -> tuple[str, dict[str, str]]:
    """The proxy a leaf's requests go through ("" for none), as kubernetes.client.rest decides
    it (the kubeconfig's `proxy-url`, else the environment's, unless `no_proxy` names the host),
    without its user info, and the headers for the proxy: the user info as `Proxy-Authorization:
    Basic` (as client-go sends it), then the Configuration's `proxy_headers`. Both hold
    credentials: never log them."""
    proxy = str(getattr(config, "proxy", None) or "")
    if not proxy or should_bypass_proxies(config.host, getattr(config, "no_proxy", None) or ""):
        return "", {}
    headers: dict[str, str] = {}
    try:
        parts = urlsplit(proxy)
        user, password, port = parts.username, parts.password, parts.port
    except ValueError:
        return proxy, headers  # left to the HTTP library to refuse
    if user is not None or password is not None:
        basic = base64.b64encode(f"{unquote(user or '')}:{unquote(password or '')}".encode())
        headers["Proxy-Authorization"] = "Basic " + basic.decode("ascii")
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if port is not None:
            netloc = f"{netloc}:{port}"
        proxy = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    headers.update({str(k): str(v) for k, v in dict(config.proxy_headers or {}).items()})
    return proxy, headers


def bearer_token(config: Configuration) -> str:
    """The Authorization value the loaded kubeconfig gives (refreshed if it expires), or ""."""
    for key in TOKEN_KEYS:
        token = config.get_api_key_with_prefix(key)  # type: ignore[no-untyped-call,unused-ignore]
        if token:
            return str(token)
    return ""


def _named(items: Any, name: Any) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return {}


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_TEXT_MAX else text[: ERROR_TEXT_MAX - 1] + "\u2026"


class LeafClient:
    """Raw JSON access to one leaf cluster; `requests` counts the HTTP requests sent."""

    def __init__(
        self,
        config: ClusterConfig,
        timeout_s: float = 10.0,
        page_size: int = 500,
        pool_size: int | None = None,
    ):
        self.config = config
        self.name = config.name
        self.timeout_s = timeout_s
        self.page_size = page_size
        self.requests = 0
        self._configuration = config.configuration()
        pool_config = self._configuration
        if pool_size is not None:
            # A watcher keeps one streaming connection per watched resource: size the pool to it.
            pool_config = copy.copy(pool_config)
            pool_config.connection_pool_maxsize = pool_size
        proxy, proxy_headers = proxy_settings(pool_config)
        if proxy and proxy != pool_config.proxy:
            # urllib3 ignores a proxy URL's user info: send it as Proxy-Authorization instead
            pool_config = copy.copy(pool_config)
            pool_config.proxy, pool_config.proxy_headers = proxy, proxy_headers
        self._pool = RESTClientObject(pool_config).pool_manager
        self._host = self._configuration.host.rstrip("/")
        self._list_auth: tuple[float, dict[str, str]] | None = None

    def close(self) -> None:
        self._pool.clear()

    def discover(self, registry: KindRegistry) -> dict[str, str]:
        """Kind key -> apiVersion for the registered kinds this cluster serves."""
        groups = self._served_groups()
        served: dict[str, str] = {}
        resources: dict[str, set[str]] = {}
        for kind in registry:
            versions = groups.get(kind.group)
            if not versions:
                continue  # e.g. no Istio on this cluster: normal, not an error
            preferred = [v for v in kind.versions if v in versions] + [
                v for v in versions if v not in kind.versions
            ]
            for version in preferred:
                gv = kind.api_version(version)
                if gv not in resources:
                    resources[gv] = self._resources(gv)
                if kind.plural in resources[gv]:
                    served[kind.key] = gv
                    break
        return served

    def _served_groups(self) -> dict[str, list[str]]:
        """Group -> served versions, the server's preferred version first."""
        data = self._get_json("/apis", listing=True)
        groups: dict[str, list[str]] = {"": ["v1"]}
        for g in data.get("groups") or []:
            versions = [v["version"] for v in g.get("versions") or []]
            pref = (g.get("preferredVersion") or {}).get("version")
            if pref in versions:
                versions.remove(pref)
                versions.insert(0, pref)
            groups[g["name"]] = versions
        return groups

    def _resources(self, group_version: str) -> set[str]:
        path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        try:
            data = self._get_json(path, listing=True)
        except ClusterError:
            return set()  # a group-version listed but not answering discovery: treat as absent
        return {str(res.get("name")) for res in data.get("resources") or []}

    def list_all(self, kind: Kind, api_version: str) -> Iterator[dict[str, Any]]:
        """Every object of `kind` in all namespaces (paginated; relisted from scratch on 410)."""
        return self.list_resource(api_version, kind.plural)

    def list_resource(self, api_version: str, plural: str) -> Iterator[dict[str, Any]]:
        """Every object of a resource (`rbac.authorization.k8s.io/v1`, `roles`), all namespaces.

        A whole list is buffered before it is yielded, so a restart after 410 Gone (expired
        continue token) never hands out a mix of two lists.
        """
        return iter(self.list_snapshot(api_version, plural)[0])

    def list_snapshot(self, api_version: str, plural: str) -> tuple[list[dict[str, Any]], str]:
        """Every object of a resource and the list's resourceVersion (to watch from)."""
        pages, rv = self.list_read(api_version, plural, lambda items: items)
        return [o for page in pages for o in page], rv

    def list_read(
        self, api_version: str, plural: str, read: Callable[[list[dict[str, Any]]], T]
    ) -> tuple[list[T], str]:
        """What `read` made of each page's items of a resource's list, as each page came
        (relisted from scratch on 410 Gone), and the list's resourceVersion: the items are
        parsed once and dropped with their page, for a caller that needs only what it makes
        of them (a page's objects alive at once, not the whole list's)."""

        def attempt() -> tuple[list[T], str]:
            got: list[T] = []
            meta: dict[str, Any] = {}
            for _, page in self._pages(api_version, plural):
                got.append(read(page.get("items") or []))
                meta = page.get("metadata") or {}
            return got, str(meta.get("resourceVersion") or "")

        return self._relisted(plural, attempt)

    def list_pages(
        self, api_version: str, plural: str, read: Callable[[list[dict[str, Any]]], T]
    ) -> tuple[list[bytes], list[T]]:
        """Every object of a resource as each page's JSON body, whole (relisted from scratch on
        410 Gone), and what `read` made of each page's items as it came (read once, then
        dropped). A caller that keeps a cluster's lists until it builds rows keeps a few large
        buffers rather than every object's dicts and strings (`page_items` parses one again):
        the small objects of a whole cluster at once set how many arenas a worker keeps."""

        def attempt() -> tuple[list[bytes], list[T]]:
            bodies: list[bytes] = []
            got: list[T] = []
            for body, page in self._pages(api_version, plural):
                got.append(read(page.get("items") or []))
                bodies.append(body)
            return bodies, got

        return self._relisted(plural, attempt)

    def _pages(self, api_version: str, plural: str) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """One list of a resource, page by page (limit and continue): each page's body and its
        JSON. Raises _Gone when the continue token expired (the list must start again)."""
        base = _collection_path(api_version, plural)
        token = ""
        while True:
            query = {"limit": str(self.page_size)}
            if token:
                query["continue"] = token
            body = self._get_body(f"{base}?{urlencode(query)}", listing=True)
            page = self._json_object(body, base)
            yield body, page
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return

    def _relisted(self, plural: str, attempt: Callable[[], T]) -> T:
        """`attempt()`, from scratch again while its list's continue token expires (410)."""
        for _ in range(MAX_RELISTS):
            try:
                return attempt()
            except _Gone:
                log.info(
                    "list of %s expired (410); relisting", plural, extra={"cluster": self.name}
                )
        raise ClusterUnreachable(f"cluster {self.name}: list of {plural} kept expiring (410)")

    def watch(
        self, api_version: str, plural: str, resource_version: str, timeout_s: float, idle_s: float
    ) -> WatchStream:
        """A watch of a resource in all namespaces from `resource_version`, with bookmarks.

        The server ends it after `timeout_s`; no byte for `idle_s` counts as a broken stream.
        """
        path = watch_path(api_version, plural, resource_version, timeout_s)
        self.requests += 1
        try:
            resp = self._pool.request(
                "GET",
                self._host + path,
                headers=self._headers(),
                timeout=urllib3.Timeout(connect=self.timeout_s, read=idle_s),
                retries=False,
                preload_content=False,
            )
        except urllib3.exceptions.HTTPError as e:
            raise ClusterUnreachable(f"cluster {self.name}: watch: {type(e).__name__}") from None
        if resp.status >= 400:
            body = resp.read()
            resp.release_conn()
            raise_for_status(self.name, resp.status, body, path)
        return WatchStream(self.name, resp)

    def _headers(self, listing: bool = False) -> urllib3.HTTPHeaderDict:
        auth = self._listing_auth() if listing else self.headers()
        return urllib3.HTTPHeaderDict({"Accept": "application/json", **auth})

    def _listing_auth(self) -> dict[str, str]:
        """`headers()` for discovery and list pages, read again after LIST_AUTH_TTL_S."""
        now = time.monotonic()
        cached = self._list_auth
        if cached is None or now - cached[0] > LIST_AUTH_TTL_S:
            cached = self._list_auth = (now, self.headers())
        return cached[1]

    def headers(self) -> dict[str, str]:
        """The credential headers of each request (the bearer token, refreshed when due)."""
        token = bearer_token(self._configuration)
        return {"Authorization": token} if token else {}

    @property
    def configuration(self) -> Configuration:
        """The loaded kubeconfig (host, TLS files, proxy): for common.leaf.async_watch."""
        return self._configuration

    def get_object(
        self,
        kind: Kind,
        api_version: str,
        namespace: str,
        name: str,
        impersonate_user: str | None = None,
        impersonate_groups: tuple[str, ...] | list[str] = (),
    ) -> dict[str, Any]:
        """One live object, read as the impersonated user when given (the leaf's RBAC decides).

        Raises NotFound, Forbidden, UpstreamTimeout, UpstreamError or ClusterUnreachable.
        """
        path = f"{_collection_path(api_version, kind.plural, namespace)}/{quote(name, safe='')}"
        headers = urllib3.HTTPHeaderDict()
        if impersonate_user:
            headers.add("Impersonate-User", header_value(impersonate_user))
            for group in impersonate_groups:
                headers.add("Impersonate-Group", header_value(group))
        try:
            return self._get_json(path, headers, detail=True)
        except ClusterError as e:
            raise UpstreamError(str(e)) from e

    def _get_json(
        self,
        path: str,
        extra: urllib3.HTTPHeaderDict | None = None,
        detail: bool = False,
        listing: bool = False,
    ) -> dict[str, Any]:
        return self._json_object(self._get_body(path, extra, detail, listing), path)

    def _get_body(
        self,
        path: str,
        extra: urllib3.HTTPHeaderDict | None = None,
        detail: bool = False,
        listing: bool = False,
    ) -> bytes:
        headers = self._headers(listing)
        for k, v in (extra or {}).items():
            headers.add(k, v)
        self.requests += 1
        try:
            resp = self._pool.request(
                "GET",
                self._host + path,
                headers=headers,
                timeout=urllib3.Timeout(connect=self.timeout_s, read=self.timeout_s),
                retries=False,
            )
        except urllib3.exceptions.NewConnectionError:
            raise ClusterUnreachable(f"cluster {self.name}: connection failed") from None
        except urllib3.exceptions.TimeoutError:
            if detail:
                raise UpstreamTimeout(f"cluster {self.name} did not answer in time") from None
            raise ClusterUnreachable(f"cluster {self.name}: timed out") from None
        except urllib3.exceptions.HTTPError as e:
            raise ClusterUnreachable(f"cluster {self.name}: {type(e).__name__}") from None
        if resp.status >= 400:
            retry_after = _retry_after_s(resp.headers.get("Retry-After"))
            _raise_for(self.name, resp.status, resp.data, path, detail, retry_after)
        return bytes(resp.data)

    def _json_object(self, body: bytes, path: str) -> dict[str, Any]:
        try:
            data = loads(body)
        except ValueError:
            raise ClusterError(f"cluster {self.name}: {path.split('?')[0]} sent no JSON") from None
        if not isinstance(data, dict):
            raise ClusterError(f"cluster {self.name}: {path.split('?')[0]} sent no JSON object")
        return data


def header_value(name: str) -> str:
    """An identity as the header value a Go API server reads back as the same string: its UTF-8
    bytes (http.client sends a str's characters as Latin-1 bytes, so "é" would arrive as the
    invalid byte 0xE9). The query service refuses names with control characters first."""
    return name if name.isascii() else name.encode("utf-8").decode("latin-1")


class _Gone(Exception):
    """410 Gone: the continue token expired."""


class WatchExpired(ClusterUnreachable):
    """The watch's resourceVersion is older than the server keeps (410): list again."""


class WatchStream:
    """The events of one open watch: iterate for `(type, object)`; `close()` from any thread
    ends a blocked read. Raises WatchExpired on a 410 ERROR event, ClusterUnreachable when the
    stream breaks or stays silent too long."""

    def __init__(self, cluster: str, resp: urllib3.BaseHTTPResponse) -> None:
        self.cluster = cluster
        self._resp = resp
        self.closed = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        buf = b""
        try:
            for chunk in self._resp.stream(2**16, decode_content=True):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    if raw.strip():
                        yield self._event(raw)
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as e:
            if not self.closed:
                raise ClusterUnreachable(
                    f"cluster {self.cluster}: watch broke ({type(e).__name__})"
                ) from None
        finally:
            self.closed = True
            self._resp.close()  # the server ends watches with `Connection: close` anyway
            self._resp.release_conn()

    def _event(self, raw: bytes) -> tuple[str, dict[str, Any]]:
        return parse_event(self.cluster, raw)

    def close(self) -> None:
        """End the stream from another thread: shuts the socket down to wake a blocked read
        (the iterating thread then closes the connection)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError, AttributeError):
            self._resp.shutdown()


def parse_event(cluster: str, raw: bytes) -> tuple[str, dict[str, Any]]:
    """One line of a watch answer: `(type, object)`; WatchExpired for a 410 ERROR event,
    ClusterUnreachable for another ERROR, ClusterError for a line that is not an event."""
    try:
        event = loads(raw)
        kind, obj = str(event["type"]), event["object"]
    except (ValueError, KeyError, TypeError):
        raise ClusterError(f"cluster {cluster}: watch sent a malformed event") from None
    if kind == "ERROR":
        code = obj.get("code") if isinstance(obj, dict) else None
        text = _cut(str(obj.get("message") or "")) if isinstance(obj, dict) else ""
        if code == 410:
            raise WatchExpired(f"cluster {cluster}: watch expired (410): {text}")
        raise ClusterUnreachable(f"cluster {cluster}: watch error {code}: {text}")
    return kind, obj


def watch_path(api_version: str, plural: str, resource_version: str, timeout_s: float) -> str:
    """The path and query of a watch of `plural` in all namespaces, with bookmarks."""
    query = {
        "watch": "1",
        "allowWatchBookmarks": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": str(int(timeout_s)),
    }
    return f"{_collection_path(api_version, plural)}?{urlencode(query)}"


def raise_for_status(cluster: str, status: int, body: bytes, path: str) -> None:
    """A watch's error answer, translated as a list's is, but for 410: the resourceVersion is
    too old (WatchExpired: list again)."""
    if status == 410:
        raise WatchExpired(f"cluster {cluster}: watch expired (HTTP 410)")
    _raise_for(cluster, status, body, path, False)


def _collection_path(api_version: str, plural: str, namespace: str = "") -> str:
    root = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    ns = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{root}{ns}/{plural}"


def _retry_after_s(raw: str | None) -> float:
    """Seconds from a Retry-After header (delta-seconds form), capped at 5 minutes; 0 = none."""
    try:
        return min(max(float(raw or 0), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:
        return 0.0  # the HTTP-date form: kube-apiserver does not send it


def page_items(body: bytes) -> list[dict[str, Any]]:
    """The items of one list page's body from `LeafClient.list_pages` (checked as JSON then)."""
    items = loads(body).get("items")
    return items if isinstance(items, list) else []


def loads(raw: bytes) -> Any:
    """JSON from a leaf: orjson, else the standard parser for what orjson refuses (integers
    beyond 64 bits in an object's spec must not fail a whole list page)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _raise_for(
    cluster: str, status: int, body: bytes, path: str, detail: bool, retry_after_s: float = 0.0
) -> None:
    """Translate an HTTP error answer; the leaf's message is kept short (it never holds tokens)."""
    try:
        message = str(json.loads(body).get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    what = f"cluster {cluster}: {path.split('?')[0]}: HTTP {status}"
    text = f"{what}: {_cut(message)}" if message else what
    if status == 410 and not detail:
        raise _Gone(text)
    if detail and status == 404:
        raise NotFound(text)
    if detail and status == 403:
        raise Forbidden(text)
    if status == 429 or status >= 500:
        if detail:
            raise UpstreamError(text)
        delay_s = max(retry_after_s, 10.0 if status == 429 else 5.0)
        raise ClusterUnreachable(text, delay_s=delay_s)
    raise ClusterError(text)
