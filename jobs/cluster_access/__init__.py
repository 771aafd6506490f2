"""How the job tools reach a stack's cluster: its outputs, read once and bounded (``outputs``), and its API server through
the stack's kubeconfig (``kube_api``)."""
