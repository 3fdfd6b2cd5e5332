"""kubesim: a Kubernetes API simulator serving many leaf clusters from one process, for the demo,
the tests and the benchmarks. Real clients (kubectl, the kubernetes package) accept it."""
