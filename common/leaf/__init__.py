"""Talking to leaf clusters: the one client of their Kubernetes APIs (`client`, with the watcher's
asyncio streams in `async_watch` and exec credential plugins in `exec_plugin`) and the cluster
registry (which clusters exist and how to reach them: a kubeconfig directory, and the sources on
the management cluster in `sources/`, read through its one client in `management`)."""
