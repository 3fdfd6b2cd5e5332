"""The cluster registry's sources on the management cluster, one module each (Weave GitOps,
Cluster API, Argo CD): each yields `Claim`s (common.leaf.claims) and never imports the registry
(common.leaf.registry), which imports them (an import-linter contract keeps it so)."""
