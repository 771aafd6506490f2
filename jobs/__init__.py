"""The job tools, one sub-package each: ``python -m jobs.launch`` submits a training job (``launch``, the workloads it
builds in ``workloads``), ``python -m jobs.acceptance`` proves a fresh cluster (``acceptance``), ``python -m jobs.rehearsal``
runs the stack's job on CPUs first (``rehearsal``, through the etcd of ``python -m jobs.local_etcd``); what their jobs
share is in ``job_building``, how they reach a cluster in ``cluster_access`` (and ``python -m jobs.api_tunnel``)."""
