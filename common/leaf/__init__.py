"""Talking to leaf clusters: the one client of their Kubernetes APIs and the cluster registry
(which clusters exist and how to reach them: a kubeconfig directory, and the sources on the
management cluster, read through its one client in `management`)."""
