"""What each kind means: the kind registry (group, versions, plural, scope, status rule) and the
status rules themselves. The bottom layer: pure functions of objects, no Redis, no network."""
