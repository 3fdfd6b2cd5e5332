"""Flux objects of the generated fleet with the status the Flux controllers write, per health
variant (see /work/shared/status-conventions.md). Istio, Gateway API and Kuadrant shapes live
in `istio_shapes`, `gateway_shapes` and `policy_shapes`.

Each shape is a dict with `@@slot@@` placeholders, compiled once into a `Template`.
"""

from __future__ import annotations

from typing import Any

from kubesim.templates import metadata, num, slot

FLUX_REASONS = {  # kind -> (healthy reason, healthy message, failed reason, failed message)
    "Kustomization": (
        "ReconciliationSucceeded",
        "Applied revision: main@sha1:@@rev@@",
        "HealthCheckFailed",
        "health check failed after 5m0s: timeout waiting for: [Deployment/@@ns@@/@@name@@ "
        "status: 'InProgress']",
    ),
    "HelmRelease": (
        "UpgradeSucceeded",
        "Helm upgrade succeeded for release @@ns@@/@@name@@.v3 with chart @@name@@@1.4.2",
        "UpgradeFailed",
        "Helm upgrade failed for release @@ns@@/@@name@@ with chart @@name@@@1.4.2: "
        "context deadline exceeded",
    ),
    "GitRepository": (
        "Succeeded",
        "stored artifact for revision 'main@sha1:@@rev@@'",
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone "
        "'https://github.com/example/@@ns@@': authentication required",
    ),
    "ImageRepository": (
        "Succeeded",
        "successful scan: found 12 tags",
        "ReconciliationFailed",
        "GET https://ghcr.io/v2/example/@@name@@/tags/list: UNAUTHORIZED",
    ),
    "ImagePolicy": (
        "Succeeded",
        "Latest image tag for 'ghcr.io/example/@@name@@' resolved to 1.4.2",
        "DependencyNotReady",
        "referenced ImageRepository '@@name@@' is not ready",
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
SOURCE_DEFAULT = ("Succeeded", "stored artifact for revision '@@rev@@'", "ArtifactFailed", "")


def _cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "observedGeneration": num("gen"),
        "lastTransitionTime": slot("ltt"),
        "reason": reason,
        "message": message,
    }


def flux_status(kind: str, variant: str) -> dict[str, Any]:
    ok_reason, ok_msg, bad_reason, bad_msg = FLUX_REASONS.get(kind, SOURCE_DEFAULT)
    bad_msg = bad_msg or f"failed to fetch artifact for {kind} @@ns@@/@@name@@: 503"
    status: dict[str, Any] = {"observedGeneration": num("gen")}
    if variant == "progressing":
        status["observedGeneration"] = num("ogen")
        conds = [
            _cond("Reconciling", "True", "Progressing", "Reconciliation in progress"),
            _cond("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
        ]
    elif variant == "unhealthy":
        conds = [_cond("Ready", "False", bad_reason, bad_msg)]
    elif variant == "stalled":
        conds = [
            _cond("Stalled", "True", bad_reason, bad_msg),
            _cond("Ready", "False", bad_reason, bad_msg),
        ]
    else:
        conds = [_cond("Ready", "True", ok_reason, ok_msg)]
    status["conditions"] = conds
    status.update(_flux_extra(kind))
    return status


def _flux_extra(kind: str) -> dict[str, Any]:
    if kind == "Kustomization":
        rev = "main@sha1:@@rev@@"
        return {"lastAppliedRevision": rev, "lastAttemptedRevision": rev}
    if kind == "HelmRelease":
        return {"lastAttemptedRevision": "1.4.2", "lastAttemptedValuesChecksum": slot("rev")}
    if kind in ("GitRepository", "HelmRepository", "OCIRepository", "Bucket", "HelmChart"):
        revision = {
            "GitRepository": "main@sha1:@@rev@@",
            "OCIRepository": "latest@sha256:@@rev@@",
            "HelmChart": "1.4.2",
        }.get(kind, "sha256:@@rev@@")
        return {
            "artifact": {
                "revision": revision,
                "path": f"{kind.lower()}/@@ns@@/@@name@@/@@rev@@.tar.gz",
                "url": f"http://source-controller.flux-system.svc.cluster.local./{kind.lower()}/"
                "@@ns@@/@@name@@/@@rev@@.tar.gz",
                "digest": "sha256:@@rev@@",
                "lastUpdateTime": slot("ltt"),
            },
            "url": f"http://source-controller.flux-system.svc.cluster.local./{kind.lower()}/"
            "@@ns@@/@@name@@/latest.tar.gz",
        }
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


FLUX_SPECS: dict[str, dict[str, Any]] = {
    "Kustomization": {
        "interval": "10m",
        "path": "./apps/@@ns@@",
        "prune": True,
        "timeout": "5m",
        "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
    },
    "HelmRelease": {
        "interval": "5m",
        "releaseName": slot("name"),
        "chart": {
            "spec": {
                "chart": slot("name"),
                "version": "1.x",
                "sourceRef": {
                    "kind": "HelmRepository",
                    "name": "charts",
                    "namespace": "flux-system",
                },
            }
        },
        "values": {"replicaCount": 2},
    },
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
    "HelmChart": {
        "interval": "10m",
        "chart": slot("name"),
        "version": "1.x",
        "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        "reconcileStrategy": "ChartVersion",
    },
    "ImageRepository": {"image": "ghcr.io/example/@@name@@", "interval": "5m"},
    "ImagePolicy": {
        "imageRepositoryRef": {"name": slot("name")},
        "policy": {"semver": {"range": ">=1.0.0"}},
    },
    "ImageUpdateAutomation": {
        "interval": "30m",
        "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
        "git": {
            "checkout": {"ref": {"branch": "main"}},
            "commit": {"author": {"name": "fluxcdbot", "email": "flux@example.com"}},
            "push": {"branch": "main"},
        },
        "update": {"path": "./apps/@@ns@@", "strategy": "Setters"},
    },
    "Alert": {
        "providerRef": {"name": "slack"},
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
        "resources": [{"kind": "GitRepository", "name": "flux-system"}],
    },
}


def flux_shape(
    api_version: str, kind: str, variant: str, suspended: bool, labels: dict[str, str]
) -> dict[str, Any]:
    """A Flux object in health `variant`; `suspended` sets `spec.suspend` beside it: the status
    stays what the controller last wrote, as `flux get` shows SUSPENDED and READY apart."""
    meta = metadata(labels)
    meta["generation"] = num("gen")
    shape: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    spec = dict(FLUX_SPECS[kind])
    if suspended:
        spec["suspend"] = True
    shape["spec"] = spec
    if kind not in ("Alert", "Provider"):
        shape["status"] = flux_status(kind, variant)
    return shape
