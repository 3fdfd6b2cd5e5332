"""What each kind means: the kind registry (group, versions, plural, scope, status rule,
relation extractors), the status rules, the Istio checks and the edge extractors themselves.
The bottom layer: pure functions of objects, no Redis, no network."""
