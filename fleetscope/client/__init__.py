"""The command-line client (`fleetscope get | describe | status | access | groups`): speaks only
the HTTP API with the caller's own identity, so it works against any deployment. It imports no
server code (no Redis, Flask or Celery); import-linter keeps it that way."""
