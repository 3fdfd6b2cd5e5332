"""The collector: Celery app, beat schedule, thin tasks, and the plain functions that pull Flux,
Istio and RBAC objects from leaf clusters into Redis. Imports `common`, never `query`."""
