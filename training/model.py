"""The pretraining model: Hugging Face's ``BertForPreTraining``, built in code from a ``BertConfig``.

Nothing is downloaded: the configuration is written here and the weights start random, as in pretraining.
Checkpoints are ``save_pretrained`` directories, so ``BertForPreTraining.from_pretrained(<checkpoint>)`` (or
``BertForMaskedLM`` / ``BertForSequenceClassification`` for fine-tuning) loads them with ``transformers``.
"""

from __future__ import annotations

from transformers import BertConfig, BertForPreTraining

# BERT-large, uncased: the values of google-bert/bert-large-uncased's config.json on the Hugging Face Hub, the
# model the reference tutorial pretrains (its vocabulary of 30522 WordPiece tokens is the dataset's).
BERT_LARGE = {
    "vocab_size": 30522,
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}
# A model small enough to train a few dozen steps on a CPU in seconds, for tests and smoke runs.
BERT_TINY = {
    "vocab_size": 128,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
CONFIGS = {"large": BERT_LARGE, "tiny": BERT_TINY}


def build(size: str) -> BertForPreTraining:
    """A randomly initialised BertForPreTraining of the named size."""
    return BertForPreTraining(BertConfig(**CONFIGS[size]))
