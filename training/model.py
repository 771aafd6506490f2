"""The pretraining model: Hugging Face's ``BertForPreTraining``, built in code from a ``BertConfig``.

Nothing is downloaded: the configuration is written here and the weights start random, as in pretraining.
Checkpoints are ``save_pretrained`` directories, so ``BertForPreTraining.from_pretrained(<checkpoint>)`` (or
``BertForMaskedLM`` / ``BertForSequenceClassification`` for fine-tuning) loads them with ``transformers``.
"""

from __future__ import annotations

import hashlib
import json

from transformers import BertConfig, BertForPreTraining

from training.options import CONFIGS  # the model sizes, as plain data


def build(size: str) -> BertForPreTraining:
    """A randomly initialised BertForPreTraining of the named size."""
    return BertForPreTraining(BertConfig(**CONFIGS[size]))


def architecture(size: str) -> str:
    """What identifies the named size's architecture in a run's record (``training.run_record``): its name and a
    short digest of its configuration, so that a size whose configuration changes is another model."""
    digest = hashlib.sha256(json.dumps(CONFIGS[size], sort_keys=True).encode()).hexdigest()[:12]
    return f"bert-{size}-{digest}"
