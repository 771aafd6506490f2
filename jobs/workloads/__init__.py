"""The training workloads the launcher submits and the rehearsal runs on CPUs: BERT pretraining (``bert_job``) and
LLM pre-training with TorchTitan (``torchtitan_job``, its options in ``titan_config``), with their Neuron compile cache
(``compile_cache``)."""
