"""Shared core, by concept: `kinds/` (what each kind means), `index/` (the Redis index),
`rbac/` (Kubernetes RBAC replicated), `leaf/` (leaf clusters and the registry); beside them
settings, errors, logging and the embedded redis-server. Imports neither Flask nor Celery."""
