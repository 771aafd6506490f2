"""Shared, Pulumi-free building blocks of the trainium-eks platform.

``catalog``  hardware facts (one data table), ``versions`` every pinned chart and image,
``config``   the stack configuration parsed once into frozen dataclasses,
``layout``   the shared-volume directory layout and Kubernetes label/taint names.
"""
