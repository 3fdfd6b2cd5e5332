"""All configuration, in one frozen dataclass read from `FLEETSCOPE_*` environment variables.

`Settings.from_env()` is the only code that reads the environment. Each field's docstring is
its documentation (docs/configuration.md lists exactly these fields; a test keeps them equal).
A bad value fails fast with a `ConfigError` naming the variable and what it accepts. Settings
that hold secrets (`SECRET_SETTINGS`) may instead be read from a file named by `<VARIABLE>_FILE`
(Kubernetes and Docker secrets are mounted as files); an error never quotes a secret.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from common import redis_urls
from common.errors import ConfigError

AuthMode = Literal["oidc", "header", "anonymous"]
LogFormat = Literal["json", "text"]
AccessLog = Literal["off", "text", "json"]
CHOICES: dict[str, tuple[str, ...]] = {
    "AuthMode": get_args(AuthMode),
    "LogFormat": get_args(LogFormat),
    "AccessLog": get_args(AccessLog),
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
ENV_PREFIX = "FLEETSCOPE_"
FILE_SUFFIX = "_FILE"
# May be read from the file named by <VARIABLE>_FILE: they carry passwords or keys.
SECRET_SETTINGS = ("redis_url", "broker_url", "continue_token_key")


ZERO_TURNS_OFF = frozenset({"sync_rebuild_after_s"})
"""Durations for which 0 is allowed and means "off"."""


@dataclass(frozen=True)
class Settings:
    """fleetscope's configuration. Construct directly in tests; use `from_env()` elsewhere."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis holding rows, grants, sync status (and, standalone, the Celery broker): `redis://`, `rediss://` or `unix://` for one server; `redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB]` (`rediss+sentinel://` with TLS; options `sentinel_password`, `ssl_cert_reqs`, `ssl_ca_certs`) for a Sentinel-managed primary; `redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]` (`rediss+cluster://` with TLS; options `ssl_cert_reqs`, `ssl_ca_certs`) for a Redis Cluster, the hosts being seed nodes."""
    broker_url: str = ""
    """The Celery broker, in Celery's URL forms (`redis://...`, `sentinel://HOST:PORT;sentinel://HOST:PORT` whose master name is `FLEETSCOPE_REDIS_URL`'s). Empty: `FLEETSCOPE_REDIS_URL`, which a standalone index allows; required with a Sentinel or Cluster index (Celery does not support Redis Cluster: give it a standalone or Sentinel-managed Redis)."""

    clusters_dir: str = ""
    """Directory of leaf-cluster kubeconfigs, one file per cluster; name = file name sans ext."""

    cluster_secrets: bool = False
    """Also read leaf clusters from Secrets labelled `fleetscope.io/cluster=true` (key `kubeconfig`)."""

    cluster_secrets_namespace: str = "fleetscope"
    """Namespaces (comma-separated) of the management cluster where cluster Secrets live; `*` = all namespaces (anyone who may create a Secret anywhere then registers clusters)."""

    management_kubeconfig: str = ""
    """Kubeconfig for the management cluster; empty = in-cluster service account."""

    gitopsclusters: bool = False
    """Also read leaf clusters from Weave GitOps `GitopsCluster` objects on the management cluster."""

    gitopsclusters_namespace: str = ""
    """Namespaces (comma-separated) of the `GitopsCluster` objects to read; empty = none (the source reports it), `*` = all namespaces (anyone who may write a GitopsCluster and a Secret anywhere then registers clusters)."""

    capi_clusters: bool = False
    """Also read leaf clusters from Cluster API `Cluster` objects and their `<name>-kubeconfig` Secrets."""

    capi_clusters_namespace: str = ""
    """Namespaces (comma-separated) of the Cluster API `Cluster` objects to read; empty = none (the source reports it), `*` = all namespaces (anyone who may write a Cluster and a Secret anywhere then registers clusters)."""

    argocd_clusters: bool = False
    """Also read leaf clusters from Argo CD cluster Secrets (`argocd.argoproj.io/secret-type=cluster`)."""

    argocd_clusters_namespace: str = "argocd"
    """Namespaces (comma-separated) of the Argo CD cluster Secrets; empty = none, `*` = all namespaces (anyone who may create a Secret anywhere then registers clusters)."""

    argocd_include_in_cluster: bool = False
    """Also register Argo CD's in-cluster entry, reached as the management cluster is."""

    cluster_name_label_namespaces: tuple[str, ...] = ()
    """Comma-separated namespaces whose registrations may name their cluster with the label `fleetscope.io/cluster-name` (`*` = all); elsewhere the label is ignored. Empty = none."""

    exec_commands: tuple[str, ...] = ()
    """Comma-separated absolute paths of the exec plugins Argo CD `execProviderConfig` and `awsAuthConfig` may run (e.g. `/usr/local/bin/aws`); empty = none. Kubeconfigs from other registry sources never run a command."""

    exec_timeout_s: float = 30.0
    """An exec credential plugin still running after this many seconds is killed (its cluster fails to load)."""

    kinds_file: str = ""
    """YAML file of extra kinds to collect, added to the built-in Flux and Istio kinds."""

    sync_interval_s: float = 60.0
    """Seconds between scheduled object syncs of each cluster."""

    sync_rebuild_after_s: float = 3600.0
    """An object sync whose listed objects are exactly those the stored rows were built from (every uid and resourceVersion, the served versions, the kinds and fleetscope's version the same, no watch event written since) builds no rows, unless those rows were built this many seconds ago or more; a rebuild also repairs any drift in the derived tables. 0 = always build."""

    rbac_sync_interval_s: float = 30.0
    """Seconds between scheduled RBAC syncs of each cluster."""

    sync_watched_interval_s: float = 600.0
    """Seconds between scheduled object and RBAC syncs of a cluster a `fleetscope watch` replica keeps current (its watches all open and heard from within the last sync interval): the safety net that repairs what the watches missed, without listing every watched cluster every interval; each is listed once in every such interval, at a moment of it fixed by its name, so clusters listed together (at a start) do not come due together. A cluster whose watcher stops vouching for it is synced at the intervals above again within one of them. 0 = watched clusters are synced like the others."""

    registry_interval_s: float = 30.0
    """Seconds between reconciles of the cluster registry (kubeconfig dir and Secrets)."""

    stale_after_s: float = 180.0
    """A cluster whose last successful object sync is older than this is reported stale."""

    rbac_max_age_s: float = 300.0
    """A cluster whose RBAC data is older than this has its rows hidden (fail closed)."""

    export_max_rows: int = 100_000
    """Most rows (or groups) one CSV export (`Accept: text/csv`) may hold; a larger one answers 422 before the first byte, so narrow the filters."""

    leaf_timeout_s: float = 10.0
    """Connect and read timeout of one request to a leaf cluster's API server."""

    leaf_page_size: int = 500
    """`limit` of the paginated list requests the collector sends to leaf clusters."""

    sync_soft_time_limit_s: float = 240.0
    """Soft time limit of one cluster sync task; the sync aborts and keeps the old data."""

    lock_ttl_s: float = 60.0
    """Expiry of a cluster's sync lock; renewed while the sync works, so a dead worker frees it."""

    watch_lease_ttl_s: float = 15.0
    """Expiry of a watcher replica's lease on a cluster; a dead replica's clusters move to its replacement within it, to the survivors within 2 x it."""

    watch_timeout_s: float = 300.0
    """Least server-side timeout of one watch request: each asks for a random time between this and twice it (as client-go's reflector does), so a replica's watches do not all end together; the watcher then resumes from its last version."""

    watch_idle_timeout_s: float = 90.0
    """A watch silent this long (no event or bookmark) is broken: reopened from its last version."""

    watch_rbac_debounce_s: float = 0.2
    """Least time between two recompiles of a watched cluster's grants: an RBAC event after a quiet window is compiled at once, later ones join the next batch."""

    watch_validate_debounce_s: float = 0.3
    """Wait after an Istio, Service or Namespace watch event before re-validating Istio config."""

    auth_mode: AuthMode = "oidc"
    """How the query service identifies callers: `oidc`, `header` or `anonymous` (demos only)."""

    trusted_proxy_cidrs: tuple[str, ...] = ()
    """Comma-separated CIDRs whose `header` identity is trusted (e.g. `127.0.0.1/32,10.0.0.0/8`)."""

    remote_user_header: str = "X-Remote-User"
    """Header carrying the user name in `header` mode."""

    remote_group_header: str = "X-Remote-Group"
    """Header carrying groups in `header` mode: each value is one group, commas included (repeat the header for more), as kube-apiserver's `--requestheader-group-headers` reads it."""

    header_group_separator: str = ""
    """`header` mode: split each group header value on this string, for proxies that join groups into one header (e.g. `,`); empty = never split (kube-apiserver's behaviour)."""

    allowed_hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
    """`header` and `anonymous` modes: comma-separated `Host` names (any port; `NAME:PORT` for one port) the API answers, so a DNS-rebinding page cannot use it; `*` = any (no check). Set the names your proxy serves."""

    oidc_issuer_url: str = ""
    """OIDC issuer (`iss`); its discovery document gives the JWKS unless a JWKS is configured."""

    oidc_client_id: str = ""
    """Expected audience (`aud`) of bearer tokens."""

    oidc_jwks_url: str = ""
    """JWKS URL overriding the issuer's discovery document."""

    oidc_jwks_file: str = ""
    """JWKS file overriding the issuer's discovery document (offline installs, tests)."""

    oidc_username_claim: str = "sub"
    """Claim holding the user name (kube-apiserver `--oidc-username-claim`)."""

    oidc_username_prefix: str = ""
    """Prefix added to user names (kube-apiserver `--oidc-username-prefix`)."""

    oidc_groups_claim: str = "groups"
    """Claim holding the groups list (kube-apiserver `--oidc-groups-claim`)."""

    oidc_groups_prefix: str = ""
    """Prefix added to each group (kube-apiserver `--oidc-groups-prefix`)."""

    oidc_allowed_system_names: tuple[str, ...] = ()
    """Comma-separated `system:` user and group names (after prefixes) a token may carry; any other `system:` name in a token is refused (401). `system:authenticated` is added by fleetscope, never taken from a token."""

    oidc_leeway_s: float = 30.0
    """Clock-skew leeway for `exp` and `nbf`, in seconds."""

    continue_token_key: str = ""
    """Secret that signs continue tokens; empty = a random key shared through Redis."""

    bind: str = "127.0.0.1:8080"
    """HOST:PORT the query service listens on (`fleetscope serve`)."""

    query_workers: int = 2
    """gunicorn worker processes of the query service."""

    query_threads: int = 4
    """Threads per gunicorn worker of the query service."""

    query_memo_mib: int = 0
    """MiB each query worker may keep in its memos (pages, counts, tables and time windows remembered between requests, by generation), shared out among them by fixed shares, entries' sizes estimated; 0 = each memo bounded by its entry count only (at fleet L one worker's memos reached ~600 MiB with 14 callers: docs/operations.md, "Memory of a query worker")."""

    query_memo_idle_s: float = 600.0
    """A query worker (and the stream process) drops what its memos hold and no request has used for between half of this and this many seconds, and closes the leaf clients (TLS connections) no detail read used as long (a sweep every half of it; 0 = never: only the budget and the entry counts bound them). Under writes most entries are of generations no request asks again: this keeps a worker's memory at what its callers asked lately, and gives it back when the load stops."""

    metrics_cluster_labels: bool = False
    """The query service's /metrics carries per-cluster series (a `cluster` label) only when true: cluster names are otherwise not shown to whoever can scrape it."""

    metrics_dir: str = ""
    """Directory for prometheus-client multiprocess files (gunicorn and Celery prefork): each query service and Celery worker keeps its own subdirectory (`fleetscope-query-<pid>`, `fleetscope-collector-<pid>`), emptied when it starts, so they may share it on one host."""

    worker_metrics_port: int = 9808
    """Port on which a Celery worker exposes /metrics (0 = off)."""

    watch_metrics_port: int = 9809
    """Port on which `fleetscope watch` exposes /metrics: leases held, events, relists, 410s, event-to-Redis lag (0 = off)."""

    worker_max_memory_mib: int = 512
    """A Celery worker child above this resident memory is replaced after its current task."""

    log_format: LogFormat = "text"
    """Log line format: `json` (production) or `text`."""

    log_level: str = "INFO"
    """Log level name: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)."""

    access_log: AccessLog = "off"
    """Query service access log on stdout: `off`, `text` or `json` (never headers or tokens)."""

    ui_demo_mode: bool = False
    """Set by `fleetscope demo`: the web view shows a user switcher (never enable in production)."""

    ui_demo_users_file: str = ""
    """Demo users for the switcher (kubesim's users JSON); empty = `kubesim-users.json` beside `clusters_dir`."""

    alert_rules_file: str = ""
    """YAML file of fleet alert rules (a top-level `rules:` list; docs/operations.md, Alerting); empty = no alerts. Re-read when it changes; a bad file keeps the previous rules."""

    alert_interval_s: float = 30.0
    """Seconds between alert evaluations (a Celery beat task; one evaluator at a time)."""

    alertmanager_url: tuple[str, ...] = ()
    """Alertmanager base URLs, comma-separated (each member of an HA pair is sent every alert), e.g. `http://alertmanager:9093`; empty = alerts are evaluated and listed at /api/v1/alerts only."""

    alertmanager_timeout_s: float = 5.0
    """Timeout of one request to an Alertmanager, in seconds (delivery never waits longer per attempt)."""

    alertmanager_bearer_token_file: str = ""
    """File holding a bearer token sent to Alertmanager (`Authorization: Bearer`); re-read at each delivery."""

    alertmanager_username: str = ""
    """User name for basic auth to Alertmanager (with `FLEETSCOPE_ALERTMANAGER_PASSWORD_FILE`)."""

    alertmanager_password_file: str = ""
    """File holding the basic-auth password for Alertmanager; re-read at each delivery."""

    alertmanager_ca_file: str = ""
    """CA bundle (PEM) that verifies Alertmanager's TLS certificate; empty = the system's CAs."""

    alertmanager_cert_file: str = ""
    """Client certificate (PEM) presented to Alertmanager (TLS client auth, with the key file)."""

    alertmanager_key_file: str = ""
    """Private key (PEM) of `FLEETSCOPE_ALERTMANAGER_CERT_FILE`."""

    external_url: str = ""
    """The URL users open the web view at, for alerts' `generatorURL` links; empty = `http://` + `FLEETSCOPE_BIND`."""
    history_max: int = 50
    """Transitions kept per object (its history: status, reason, suspension, revision, appearing, disappearing)."""

    history_days: float = 14.0
    """Days an object's transitions are kept, also after the object was deleted."""

    flapping_threshold: int = 4
    """Transitions in the last 24 hours from which an object counts as flapping (`flapping=true`, the web view's mark); the same for the collector, the watcher and the query service."""

    watch_feed_max: int = 256
    """Row changes kept per cluster in its change feed (`GET /api/v1/watch` resumes within them; an older position answers 410 Expired and the client lists again; query workers move what they hold of a written cluster by them, and read it whole past them). About 400 bytes each."""

    watch_bookmark_s: float = 15.0
    """Seconds between BOOKMARK events on a watch stream (Kubernetes' own interval is about a minute; the web view's reconnects resume from them)."""

    watch_streams_max: int = 2000
    """Watch streams the query service's stream process serves at once; more answer 429 (each holds a socket and its buffers there, never a request thread: docs/benchmarks.md, "watch_streams", has the memory per stream)."""

    pure: bool = False
    """Run the row builder's modules from their Python sources even where the build compiled them to C (common/native.py; the same results, more CPU: to compare, or to rule the compiled code out). Read from the environment when `common` is first imported, before the other settings."""

    extra: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Not a setting: unrecognised `FLEETSCOPE_*` variables, reported at start-up."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every `FLEETSCOPE_*` variable; unknown ones are kept in `extra` for a warning."""
        env = os.environ if environ is None else environ
        fields = {f.name: f for f in setting_fields()}
        values: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for name, raw in env.items():
            if not name.startswith(ENV_PREFIX):
                continue
            key = name[len(ENV_PREFIX) :].lower()
            if key in fields:
                values[key] = _parse(fields[key], raw)
            elif _secret_file_key(key) is None:
                extra[name] = raw
        for key in SECRET_SETTINGS:
            file_var = env_name(key) + FILE_SUFFIX
            if file_var in env:
                if key in values:
                    raise ConfigError(f"set {env_name(key)} or {file_var}, not both")
                values[key] = _parse(fields[key], _read_secret(file_var, env[file_var]))
        settings = cls(**values, extra=extra)
        settings.validate()
        return settings

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated)."""
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new

    def validate(self) -> None:
        """Fail fast on values that parse but make no sense."""
        _check_namespaces(self)
        _check_identity(self)
        for f in setting_fields():
            value = getattr(self, f.name)
            if f.name in ZERO_TURNS_OFF and value < 0:
                raise ConfigError(f"{env_name(f.name)} must be 0 (off) or a number of seconds")
            if f.name.endswith("_s") and f.name not in ZERO_TURNS_OFF and value <= 0:
                raise ConfigError(f"{env_name(f.name)} must be a positive number of seconds")
        if self.auth_mode not in get_args(AuthMode):
            raise ConfigError(f"{env_name('auth_mode')} must be one of oidc, header, anonymous")
        if self.access_log not in get_args(AccessLog):
            raise ConfigError(f"{env_name('access_log')} must be one of off, text, json")
        if self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError(
                f"{env_name('log_level')} must be one of {', '.join(LOG_LEVELS)}, "
                f"got {self.log_level!r}"
            )
        for cidr in self.trusted_proxy_cidrs:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as e:
                raise ConfigError(
                    f"{env_name('trusted_proxy_cidrs')}: {cidr!r} is not a CIDR like 10.0.0.0/8"
                ) from e
        if (
            min(
                self.leaf_page_size,
                self.query_workers,
                self.query_threads,
                self.worker_max_memory_mib,
                self.history_max,
                self.history_days,
                self.flapping_threshold,
                self.watch_feed_max,
                self.watch_streams_max,
            )
            < 1
        ):
            raise ConfigError(
                "page size, query workers/threads, worker memory and history retention must be "
                "at least 1"
            )
        if self.query_memo_mib < 0:
            raise ConfigError(f"{env_name('query_memo_mib')} must be 0 (off) or a number of MiB")
        if self.query_memo_idle_s < 0:
            raise ConfigError(
                f"{env_name('query_memo_idle_s')} must be 0 (never) or a number of seconds"
            )
        _check_alerting(self)
        topology = redis_urls.check(self.redis_url, env_name("redis_url"))
        if self.broker_url.startswith("sentinel://") and topology != "sentinel":
            raise ConfigError(
                f"{env_name('broker_url')}: a sentinel:// broker takes its master name from "
                f"{env_name('redis_url')}, which must then be a redis+sentinel:// URL"
            )

    def broker(self) -> tuple[str, dict[str, Any]]:
        """Celery's broker URL and the transport options it needs (for a `sentinel://` broker:
        the master name, and the Sentinels' password, from the index's URL). A ConfigError when
        the index is not standalone and no broker is set: asked by the processes that use Celery
        (the collector's worker and beat), not by the query service nor the watcher."""
        topology = redis_urls.check(self.redis_url, env_name("redis_url"))
        if topology != "standalone" and not self.broker_url:
            hint = (
                "sentinel://HOST:PORT;sentinel://HOST:PORT, the master name is taken from "
                f"{env_name('redis_url')}"
                if topology == "sentinel"
                else "Celery does not support Redis Cluster: a standalone or Sentinel-managed "
                "Redis, e.g. redis://HOST:6379/0"
            )
            raise ConfigError(
                f"{env_name('broker_url')} is required with a {topology} index: Celery cannot "
                f"use {env_name('redis_url')}'s form ({hint})"
            )
        url = self.broker_url or self.redis_url
        if not url.startswith("sentinel://"):
            return url, {}
        index = redis_urls.parse_sentinel(self.redis_url)
        options: dict[str, Any] = {"master_name": index.master}
        if index.sentinel_password:
            options["sentinel_kwargs"] = {"password": index.sentinel_password}
        return url, options


def setting_fields() -> list[dataclasses.Field[Any]]:
    """The documented settings (every field except `extra`)."""
    return [f for f in dataclasses.fields(Settings) if f.name != "extra"]


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _check_namespaces(s: Settings) -> None:
    """Namespaces of the cluster registry's sources must be namespace names (or `*` alone);
    exec plugins are allowed by absolute path."""
    for name in (
        "cluster_secrets_namespace",
        "gitopsclusters_namespace",
        "capi_clusters_namespace",
        "argocd_clusters_namespace",
        "cluster_name_label_namespaces",
    ):
        parts = namespace_list(getattr(s, name))
        if parts == ("*",):
            continue
        for part in parts:
            if not _NAMESPACE.fullmatch(part):
                raise ConfigError(
                    f"{env_name(name)}: {part!r} is not a namespace name (comma-separated "
                    "namespace names, or `*` alone for all namespaces)"
                )
    for command in s.exec_commands:
        if not os.path.isabs(command):
            raise ConfigError(f"{env_name('exec_commands')}: {command!r} is not an absolute path")


def namespace_list(value: str | tuple[str, ...]) -> tuple[str, ...]:
    """The namespaces a registry source's setting names (`("*",)` = all namespaces)."""
    parts = value if isinstance(value, tuple) else tuple(value.split(","))
    return tuple(p.strip() for p in parts if p.strip())


def _check_alerting(s: Settings) -> None:
    """Alertmanager and web-view URLs are absolute http(s) URLs; one kind of credentials."""
    for name, urls in (
        ("alertmanager_url", s.alertmanager_url),
        ("external_url", (s.external_url,)),
    ):
        for url in urls:
            if url and not re.match(r"^https?://[^/\s]+", url):
                raise ConfigError(f"{env_name(name)}: {url[:80]!r} is not an http(s) URL")
    if s.alertmanager_bearer_token_file and s.alertmanager_password_file:
        raise ConfigError(
            f"set {env_name('alertmanager_bearer_token_file')} or "
            f"{env_name('alertmanager_password_file')}, not both"
        )
    if bool(s.alertmanager_cert_file) != bool(s.alertmanager_key_file):
        raise ConfigError(
            f"{env_name('alertmanager_cert_file')} and {env_name('alertmanager_key_file')} "
            "go together"
        )


# Added by fleetscope (or the anonymous mode) itself: never something a token may claim.
_NEVER_FROM_TOKENS = ("system:authenticated", "system:unauthenticated", "system:anonymous")


def _check_identity(s: Settings) -> None:
    """The `system:` allow-list names only `system:` names a token may really carry."""
    var = env_name("oidc_allowed_system_names")
    for name in s.oidc_allowed_system_names:
        if not name.startswith("system:"):
            raise ConfigError(f"{var}: {name!r} does not start with `system:`")
        if name in _NEVER_FROM_TOKENS:
            raise ConfigError(f"{var}: {name!r} is set by fleetscope, never taken from a token")


def env_name(field_name: str) -> str:
    """The environment variable of a field: `redis_url` -> `FLEETSCOPE_REDIS_URL`."""
    return ENV_PREFIX + field_name.upper()


def _secret_file_key(key: str) -> str | None:
    """`redis_url` for `redis_url_file` (a secret read from a file), else None."""
    stem = key.removesuffix(FILE_SUFFIX.lower())
    return stem if stem != key and stem in SECRET_SETTINGS else None


def _read_secret(variable: str, path: str) -> str:
    """The file's text without its final line break (editors and `echo` add one)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise ConfigError(f"{variable}: cannot read {path!r}: {reason}") from None
    return text.removesuffix("\n").removesuffix("\r")


def _parse(f: dataclasses.Field[Any], raw: str) -> Any:
    name, kind = env_name(f.name), str(f.type)
    raw = raw.strip()
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{name} must be true or false, got {raw!r}")
    if kind in ("int", "float"):
        try:
            return int(raw) if kind == "int" else float(raw)
        except ValueError as e:
            raise ConfigError(f"{name} must be a number ({kind}), got {raw!r}") from e
    if kind.startswith("tuple"):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if kind in CHOICES and raw not in CHOICES[kind]:
        raise ConfigError(f"{name} must be one of {', '.join(CHOICES[kind])}, got {raw!r}")
    return raw
