"""Fleet alerts: rules over the index (common.alerts.rules, .template), their incremental
evaluation with its state in Redis (.evaluate, .state), delivery to Alertmanager's v2 API
(.deliver) and the RBAC-filtered read of firing alerts (.read). Plain functions: the Celery
tasks (collector.alerts) and the route (query.alerts) are thin shells around them."""
