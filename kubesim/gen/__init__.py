"""kubesim's generated fleets: a fleet's clusters, namespaces, Flux, Istio, Gateway API and
Kuadrant objects, Services and multi-tenant RBAC, deterministic from a seed. Objects only: the
serving side (kubesim's server, API and watches) imports them, never the reverse."""
