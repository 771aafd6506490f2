"""The training workloads the launcher submits and the rehearsal runs on CPUs, one declaration each in the registry
(``registry``): BERT pretraining (``bert``, its runs worked out in ``bert_job``) and LLM pre-training with TorchTitan
(``torchtitan``; ``torchtitan_job``, its options in ``titan_config``, its recipes in ``titan_recipes``), with their
Neuron compile cache (``compile_cache``) and the one builder of their jobs (``workload``)."""
