"""Shared core, by concept: `kinds/` (what each kind means), `index/` (the Redis index),
`rbac/` (Kubernetes RBAC replicated), `leaf/` (leaf clusters and the registry), `alerts/` (fleet
alerts); beside them settings, errors, logging, label selectors and the Redis plumbing (client,
URLs, the embedded redis-server). Imports neither Flask nor Celery."""

from common import native as _native

NATIVE_OFF = _native.guard()
"""Why the compiled modules (common.native) run from their sources: "pure", "stale" or ""."""
