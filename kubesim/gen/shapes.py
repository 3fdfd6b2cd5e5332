"""Flux objects of the generated fleet with the status the Flux controllers write, per health
state (see /work/shared/status-conventions.md). Istio, Gateway API and Kuadrant shapes live
in `istio_shapes`, `gateway_shapes` and `policy_shapes`; which state an object is in, and what
it references, is decided by `kubesim.gen.flux`.

A failing source holds no artifact (source-controller's storage is an emptyDir: after a
restart, a source that cannot fetch has none), so its users fail too. A `blocked` object
failed because of what it references, with the reason its controller writes and the message
in the raw slot `msg`; a `fresh` one is blocked and was never reconciled (no
observedGeneration, nothing applied).

Each shape is a dict with `@@slot@@` placeholders, compiled once into a `Template`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kubesim.gen.templates import metadata, num, raw, slot

SOURCE_KINDS = ("GitRepository", "HelmRepository", "OCIRepository", "Bucket", "HelmChart")
BAD_GIT_URL = "https://github.com:example/@@ns@@"  # scp-style path in an https URL
FLUX_REASONS = {  # kind -> (healthy reason, healthy message, failed reason, failed message)
    "Kustomization": (
        "ReconciliationSucceeded",
        "Applied revision: @@applied@@",
        "HealthCheckFailed",
        "health check failed after 5m0s: timeout waiting for: [Deployment/@@ns@@/@@name@@ "
        "status: 'InProgress']",
    ),
    "HelmRelease": (
        "UpgradeSucceeded",
        "Helm upgrade succeeded for release @@ns@@/@@name@@.v3 with chart @@name@@@@chartat@@",
        "UpgradeFailed",
        "Helm upgrade failed for release @@ns@@/@@name@@ with chart @@name@@@@chartat@@: "
        "context deadline exceeded",
    ),
    "GitRepository": (
        "Succeeded",
        "stored artifact for revision 'main@sha1:@@rev@@'",
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone "
        "'https://github.com/example/@@ns@@': authentication required",
    ),
    "HelmRepository": (
        "Succeeded",
        "stored artifact: revision 'sha256:@@rev@@'",
        "Failed",
        "failed to fetch Helm repository index: failed to cache index to temporary file: "
        "failed to fetch https://charts.example.com/@@name@@/index.yaml : 404 Not Found",
    ),
    "OCIRepository": (
        "Succeeded",
        "stored artifact for digest 'latest@sha256:@@rev@@'",
        "OCIPullFailed",
        "failed to determine artifact digest: GET https://ghcr.io/v2/example/manifests/"
        "@@name@@/manifests/latest: UNAUTHORIZED: authentication required",
    ),
    "Bucket": (
        "Succeeded",
        "stored artifact: revision 'sha256:@@rev@@'",
        "BucketOperationFailed",
        "bucket '@@name@@' not found",
    ),
    "HelmChart": (
        "ChartPullSucceeded",
        "pulled '@@cname@@' chart with version '1.4.2'",
        "ChartPullError",
        "chart pull error: failed to get chart version for remote reference: no '@@cname@@' "
        "chart with version matching '1.x' found",
    ),
    "ImageRepository": (
        "Succeeded",
        "successful scan: found 12 tags",
        "ReconciliationFailed",
        "GET https://ghcr.io/v2/example/@@name@@/tags/list: UNAUTHORIZED",
    ),
    "ImagePolicy": (
        "Succeeded",
        "Latest image tag for ghcr.io/example/@@name@@ resolved to 1.4.2",
        "Failure",
        "unable to determine latest version from provided list",
    ),
    "ImageUpdateAutomation": (
        "Succeeded",
        "no updates made; last commit @@rev@@ at 2025-01-02T00:00:00Z",
        "GitOperationFailed",
        "failed to push to 'main': remote rejected",
    ),
    "Receiver": (
        "Succeeded",
        "Receiver initialized for path: /hook/@@rev@@",
        "TokenNotFound",
        "unable to read token from secret '@@ns@@/webhook-token'",
    ),
}
STALLED_GIT = (  # source-controller stalls on a URL it cannot parse
    "URLInvalid",
    f'failed to parse url \'{BAD_GIT_URL}\': parse "{BAD_GIT_URL}": invalid port ":example" '
    "after host",
)
PACKAGED = ("ChartPackageSucceeded", "packaged '@@cname@@' chart with version '1.4.2'")
REVISIONS = {  # what a source's artifact revision looks like
    "GitRepository": "main@sha1:@@rev@@",
    "OCIRepository": "latest@sha256:@@rev@@",
    "HelmChart": "1.4.2",
}
# What a controller leaves beside Ready=False when it returns early for want of a dependency:
# helm-controller marks Reconciling before checking them; source-controller, finding no
# artifact in storage, marks Reconciling ("building artifact") and then retries.
BLOCKED_RECONCILING = {
    "HelmRelease": ("Progressing", "Fulfilling prerequisites"),
    "HelmChart": ("ProgressingWithRetry", "building artifact: disappeared from storage"),
}
RETRYING = ("ProgressingWithRetry", "building artifact: disappeared from storage")


class FluxForm(NamedTuple):
    """What shapes a Flux object's template. `state`: healthy | progressing | unhealthy |
    stalled | blocked | fresh. `refs`: the spec fields filled from raw slots `ref_<field>`
    (`chart` is HelmRelease's chart template, whose sourceRef is the slot). `reason`: Ready's
    reason when blocked. `source`: the kind of the referenced source (revision formats)."""

    kind: str
    state: str = "healthy"
    suspended: bool = False
    refs: tuple[str, ...] = ()
    reason: str = ""
    source: str = ""


def failure(kind: str, state: str) -> tuple[str, str]:
    """(reason, message) of a Flux object failing on its own (`unhealthy` or `stalled`)."""
    if kind == "GitRepository" and state == "stalled":
        return STALLED_GIT
    _, _, reason, message = FLUX_REASONS[kind]
    return reason, message


def _cond(ctype: str, status: str, reason: str, message: Any) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "observedGeneration": num("gen"),
        "lastTransitionTime": slot("ltt"),
        "reason": reason,
        "message": message,
    }


def _healthy(form: FluxForm) -> tuple[str, str]:
    if form.kind == "HelmChart" and form.source in ("GitRepository", "Bucket"):
        return PACKAGED
    reason, message, _, _ = FLUX_REASONS[form.kind]
    return reason, message.replace("@@applied@@", REVISIONS.get(form.source, "sha256:@@rev@@"))


def flux_conditions(form: FluxForm) -> list[dict[str, Any]]:
    kind, state = form.kind, form.state
    source = kind in SOURCE_KINDS
    if state == "progressing":
        return [
            _cond("Reconciling", "True", "Progressing", "Reconciliation in progress"),
            _cond("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
        ]
    if state in ("unhealthy", "stalled"):
        reason, message = failure(kind, state)
        first = _cond("Stalled", "True", reason, message)
        if state == "unhealthy":
            first = _cond("Reconciling", "True", *RETRYING)
        fetch = [_cond("FetchFailed", "True", reason, message)] if source else []
        head = [first] if source or state == "stalled" else []
        return [*head, *fetch, _cond("Ready", "False", reason, message)]
    if state in ("blocked", "fresh"):
        conds = [_cond("Ready", "False", form.reason, raw("msg"))]
        if kind == "HelmChart":
            conds.insert(0, _cond("FetchFailed", "True", form.reason, raw("msg")))
        if kind in BLOCKED_RECONCILING:
            conds.insert(0, _cond("Reconciling", "True", *BLOCKED_RECONCILING[kind]))
        return conds
    return [_cond("Ready", "True", *_healthy(form))]


def flux_status(form: FluxForm) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": num("gen")}
    if form.state == "progressing":
        status["observedGeneration"] = num("ogen")
    status["conditions"] = flux_conditions(form)
    if form.state == "fresh":  # never reconciled: nothing observed, nothing applied
        del status["observedGeneration"]
        return status
    failing = form.state in ("unhealthy", "stalled", "blocked")
    if not (failing and form.kind in SOURCE_KINDS):  # a failing source holds no artifact
        status.update(_flux_extra(form))
    return status


def _flux_extra(form: FluxForm) -> dict[str, Any]:
    kind = form.kind
    if kind == "Kustomization":
        rev = REVISIONS.get(form.source, "sha256:@@rev@@")
        return {"lastAppliedRevision": rev, "lastAttemptedRevision": rev}
    if kind == "HelmRelease":
        extra = {"lastAttemptedRevision": slot("cver"), "lastAttemptedValuesChecksum": slot("rev")}
        return {"helmChart": slot("hc"), **extra} if "chart" in form.refs else extra
    if kind in SOURCE_KINDS:
        return _artifact(kind)
    if kind == "ImageRepository":
        return {
            "canonicalImageName": "ghcr.io/example/@@name@@",
            "lastScanResult": {"tagCount": 12},
        }
    if kind == "ImagePolicy":
        return {"latestImage": "ghcr.io/example/@@name@@:1.4.2"}
    if kind == "ImageUpdateAutomation":
        return {"lastPushCommit": slot("rev"), "lastAutomationRunTime": slot("ltt")}
    if kind == "Receiver":
        return {"webhookPath": "/hook/@@rev@@"}
    return {}


def _artifact(kind: str) -> dict[str, Any]:
    base = f"http://source-controller.flux-system.svc.cluster.local./{kind.lower()}/@@ns@@/@@name@@"
    return {
        "artifact": {
            "revision": REVISIONS.get(kind, "sha256:@@rev@@"),
            "path": f"{kind.lower()}/@@ns@@/@@name@@/@@rev@@.tar.gz",
            "url": f"{base}/@@rev@@.tar.gz",
            "digest": "sha256:@@rev@@",
            "lastUpdateTime": slot("ltt"),
        },
        "url": f"{base}/latest.tar.gz",
    }


FLUX_SPECS: dict[str, dict[str, Any]] = {  # without references: `FluxForm.refs` adds them
    "Kustomization": {"interval": "10m", "path": "./apps/@@ns@@", "prune": True, "timeout": "5m"},
    "HelmRelease": {"interval": "5m", "releaseName": slot("name"), "values": {"replicaCount": 2}},
    "GitRepository": {
        "interval": "1m",
        "url": "https://github.com/example/@@ns@@",
        "ref": {"branch": "main"},
        "secretRef": {"name": "git-credentials"},
    },
    "HelmRepository": {"interval": "10m", "url": "https://charts.example.com/@@name@@"},
    "OCIRepository": {
        "interval": "5m",
        "url": "oci://ghcr.io/example/manifests/@@name@@",
        "ref": {"tag": "latest"},
    },
    "Bucket": {
        "interval": "5m",
        "provider": "generic",
        "bucketName": slot("name"),
        "endpoint": "minio.example.com",
    },
    "HelmChart": {"interval": "10m", "version": "1.x", "reconcileStrategy": "ChartVersion"},
    "ImageRepository": {"image": "ghcr.io/example/@@name@@", "interval": "5m"},
    "ImagePolicy": {"policy": {"semver": {"range": ">=1.0.0"}}},
    "ImageUpdateAutomation": {
        "interval": "30m",
        "git": {
            "checkout": {"ref": {"branch": "main"}},
            "commit": {"author": {"name": "fluxcdbot", "email": "flux@example.com"}},
            "push": {"branch": "main"},
        },
        "update": {"path": "./apps/@@ns@@", "strategy": "Setters"},
    },
    "Alert": {
        "eventSeverity": "error",
        "eventSources": [
            {"kind": "Kustomization", "name": "*"},
            {"kind": "HelmRelease", "name": "*"},
        ],
    },
    "Provider": {"type": "slack", "channel": "alerts-@@ns@@", "secretRef": {"name": "slack-url"}},
    "Receiver": {
        "type": "github",
        "events": ["ping", "push"],
        "secretRef": {"name": "webhook-token"},
    },
}


def _spec(form: FluxForm) -> dict[str, Any]:
    spec = dict(FLUX_SPECS[form.kind])
    if form.kind == "GitRepository" and form.state == "stalled":
        spec["url"] = BAD_GIT_URL
    from_files = form.source in ("GitRepository", "Bucket")  # a chart kept beside manifests
    chart = "./charts/@@cname@@" if from_files else slot("cname")
    if form.kind == "HelmChart":
        spec = {"chart": chart, **spec}
    for field in form.refs:
        if field == "chart":
            spec["chart"] = {
                "spec": {"chart": chart, "version": "1.x", "sourceRef": raw("ref_chart")}
            }
        else:
            spec[field] = raw(f"ref_{field}")
    if form.suspended:
        spec["suspend"] = True
    return spec


def flux_shape(api_version: str, form: FluxForm, labels: dict[str, str]) -> dict[str, Any]:
    """A Flux object in `form`; a suspended one keeps the status its controller last wrote, as
    `flux get` shows SUSPENDED and READY apart."""
    meta = metadata(labels)
    meta["generation"] = num("gen")
    shape: dict[str, Any] = {"apiVersion": api_version, "kind": form.kind, "metadata": meta}
    shape["spec"] = _spec(form)
    if form.kind not in ("Alert", "Provider"):
        shape["status"] = flux_status(form)
    return shape
