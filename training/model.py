"""The pretraining model: Hugging Face's ``BertForPreTraining``, built in code from a ``BertConfig``.

Nothing is downloaded: the configuration is written here and the weights start random, as in pretraining.
Checkpoints are ``save_pretrained`` directories, so ``BertForPreTraining.from_pretrained(<checkpoint>)`` (or
``BertForMaskedLM`` / ``BertForSequenceClassification`` for fine-tuning) loads them with ``transformers``.
"""

from __future__ import annotations

from transformers import BertConfig, BertForPreTraining

from training.options import CONFIGS  # the model sizes, as plain data


def build(size: str) -> BertForPreTraining:
    """A randomly initialised BertForPreTraining of the named size."""
    return BertForPreTraining(BertConfig(**CONFIGS[size]))
