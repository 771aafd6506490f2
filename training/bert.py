"""BERT for pretraining (masked language model + next-sentence prediction), in plain PyTorch.

Plain modules keep the model free of hub downloads and of a transformers version pin: Neuron compiles it
through torch-xla like any other graph. ``BertConfig.large()`` is BERT-large (24 layers, 1024 hidden, 16 heads);
``BertConfig.tiny()`` exists for tests and smoke runs on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30528  # 30522 WordPiece tokens, padded to a multiple of 64 as in the reference recipe
    hidden_size: int = 1024
    num_layers: int = 24
    num_heads: int = 16
    intermediate_size: int = 4096
    max_position: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12

    @classmethod
    def large(cls) -> BertConfig:
        return cls()

    @classmethod
    def tiny(cls) -> BertConfig:
        return cls(vocab_size=128, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_position=64, dropout=0.0)


class BertForPreTraining(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.embedding_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        layer = nn.TransformerEncoderLayer(
            config.hidden_size,
            config.num_heads,
            config.intermediate_size,
            config.dropout,
            activation="gelu",
            layer_norm_eps=config.layer_norm_eps,
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.mlm_transform = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.GELU(),
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps),
        )
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.pooler = nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.Tanh())
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        hidden = self.word_embeddings(input_ids) + self.position_embeddings(positions) + self.token_type_embeddings(segment_ids)
        hidden = self.dropout(self.embedding_norm(hidden))
        hidden = self.encoder(hidden, src_key_padding_mask=input_mask == 0)
        # Only the masked positions go through the vocabulary projection (the decoder shares the embeddings).
        index = masked_lm_positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
        masked = self.mlm_transform(torch.gather(hidden, 1, index))
        mlm_logits = masked @ self.word_embeddings.weight.T + self.mlm_bias
        nsp_logits = self.nsp_head(self.pooler(hidden[:, 0]))
        return mlm_logits, nsp_logits


def pretraining_loss(mlm_logits, nsp_logits, masked_lm_ids, masked_lm_positions, next_sentence_labels):
    """Masked-LM cross entropy over the real predictions (position 0 pads the list) plus NSP cross entropy."""
    targets = masked_lm_ids.masked_fill(masked_lm_positions == 0, -100)
    mlm = nn.functional.cross_entropy(mlm_logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
    nsp = nn.functional.cross_entropy(nsp_logits.float(), next_sentence_labels)
    return mlm + nsp
