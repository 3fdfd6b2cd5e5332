"""Shared core: settings, kind registry, row model and status rules, Redis keys and store, RBAC
engine, cluster registry, errors, logging and metrics helpers. Imports neither Flask nor Celery."""
