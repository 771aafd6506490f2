"""Pre-tokenised BERT pretraining shards in HDF5, the layout of the tutorial's wikicorpus dataset.

Each shard holds ``input_ids``, ``segment_ids``, ``input_mask`` ([samples, seq_len]), ``masked_lm_positions``,
``masked_lm_ids`` ([samples, max_predictions]; position 0 marks padding) and ``next_sentence_labels`` ([samples]).
A sample comes out as the keyword arguments of Hugging Face's ``BertForPreTraining``.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

IGNORED_LABEL = -100  # the label cross-entropy skips (torch's and transformers' default ignore_index)
FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")


def shard_paths(data_dir: Path) -> list[Path]:
    paths = sorted(p for p in Path(data_dir).rglob("*") if p.suffix in (".hdf5", ".h5"))
    if not paths:
        raise FileNotFoundError(f"{data_dir}: no .hdf5 shards; load the dataset first (README: Run a training job)")
    return paths


class ShardDataset(Dataset):
    """All samples of the shards under a directory, read into memory one shard at a time on first use."""

    def __init__(self, data_dir: Path):
        self.paths = shard_paths(data_dir)
        self.sizes = []
        for path in self.paths:
            with h5py.File(path, "r") as shard:
                self.sizes.append(len(shard["next_sentence_labels"]))
        self.offsets = np.cumsum([0, *self.sizes])
        self._cache: tuple[int, dict] | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        shard = int(np.searchsorted(self.offsets, index, side="right") - 1)
        if self._cache is None or self._cache[0] != shard:
            with h5py.File(self.paths[shard], "r") as f:
                self._cache = (shard, {name: np.asarray(f[name]) for name in FIELDS})
        row = index - int(self.offsets[shard])
        return model_inputs({name: torch.as_tensor(values[row], dtype=torch.long) for name, values in self._cache[1].items()})


def model_inputs(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One sample in BertForPreTraining's terms: the masked-LM labels are -100 (ignored) except at the masked
    positions, which hold the original tokens; the position list is padded with 0 after its last entry."""
    positions, ids = sample["masked_lm_positions"], sample["masked_lm_ids"]
    padding = (positions == 0).nonzero()
    count = int(padding[0]) if len(padding) else len(positions)
    labels = torch.full_like(sample["input_ids"], IGNORED_LABEL)
    labels[positions[:count]] = ids[:count]
    return {
        "input_ids": sample["input_ids"],
        "token_type_ids": sample["segment_ids"],
        "attention_mask": sample["input_mask"],
        "labels": labels,
        "next_sentence_label": sample["next_sentence_labels"],
    }


def write_synthetic_shard(path: Path, samples: int, seq_len: int, vocab_size: int, max_predictions: int, seed: int = 0) -> Path:
    """A shard of random token ids in the real layout, for tests and smoke runs (never for training)."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(5, vocab_size, size=(samples, seq_len))
    positions = np.sort([rng.choice(np.arange(1, seq_len), max_predictions, replace=False) for _ in range(samples)], axis=1)
    with h5py.File(path, "w") as shard:
        shard["input_ids"] = input_ids
        shard["segment_ids"] = (np.arange(seq_len) >= seq_len // 2).astype(np.int64)[None].repeat(samples, 0)
        shard["input_mask"] = np.ones((samples, seq_len), dtype=np.int64)
        shard["masked_lm_positions"] = positions
        shard["masked_lm_ids"] = np.take_along_axis(input_ids, positions, axis=1)
        shard["next_sentence_labels"] = rng.integers(0, 2, size=samples)
    return path
