"""Kubernetes RBAC replicated: the authorizer (kube-apiserver semantics), the per-subject
compiled `list` grants and their Redis encoding, and the per-caller access resolver."""
