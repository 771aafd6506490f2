"""preflight: evaluate the trainium-eks program for a stack offline, without the Pulumi CLI, AWS or a cluster.

``python -m preflight plan STACK [--stack-file PATH] [--preview] [--json]``
"""
