"""The watcher (`fleetscope watch`): replicas sharing the clusters through leases, each cluster's
lists and watches on one event loop, its RBAC and Istio config kept in memory. Runs without
Celery: it imports no task, beat or worker module (an import-linter contract keeps it so)."""
