"""A tiny tokenizer and text dataset for rehearsing a TorchTitan run on CPUs, made here rather than downloaded.

TorchTitan's debug configuration expects its repository's test assets (``tests/assets/tokenizer`` and the ``c4_test``
JSON split), which its wheel does not ship, and this machine reaches no model hub. So the same shapes are generated,
deterministically: a JSON-lines file of ``{"text": ...}`` documents, which TorchTitan's ``c4_test`` loader reads with
``datasets.load_dataset(path, split="train")`` (torchtitan 0.3.0 ``hf_datasets/text_datasets.py`` 44-48), and a
byte-level BPE trained on it with Hugging Face ``tokenizers``, saved as ``tokenizer.json`` beside the
``tokenizer_config.json`` from which TorchTitan's tokenizer reads its BOS and EOS tokens (``components/tokenizer.py``).

On the shared volume they sit where a job's datasets do: ``<datasetsPath>/<ASSETS>/tokenizer`` (``--hf_assets_path``)
and ``<datasetsPath>/<ASSETS>/text`` (``--dataloader.dataset_path``).

    python -m training.titan_assets DATASETS_DIR     # writes DATASETS_DIR/titan-rehearsal/{tokenizer,text}
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ASSETS = "titan-rehearsal"
TOKENIZER_DIR = "tokenizer"
TEXT_DIR = "text"
DATASET = "c4_test"  # TorchTitan's loader for a local JSON split
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
VOCAB_SIZE = 512  # below the debug model's vocabulary (2048), so every id has an embedding
DOCUMENTS = 400
SEED = 0
# Common English words, for text a tokenizer can learn merges from.
# fmt: off
WORDS = (
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her",
    "she", "there", "one", "all", "we", "their",
)
# fmt: on


def documents(count: int = DOCUMENTS, seed: int = SEED) -> list[str]:
    """``count`` documents of 200 to 600 common English words, the same on every call."""
    chosen = random.Random(seed)
    return [" ".join(chosen.choice(WORDS) for _ in range(chosen.randint(200, 600))) for _ in range(count)]


def write_assets(directory: Path) -> Path:
    """The tokenizer and dataset under ``directory`` (``<datasets>/<ASSETS>``), written once; returns ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer_dir, text_dir = directory / TOKENIZER_DIR, directory / TEXT_DIR
    if (tokenizer_dir / "tokenizer.json").exists() and (text_dir / "data.json").exists():
        return directory
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    text_dir.mkdir(parents=True, exist_ok=True)
    texts = documents()
    (text_dir / "data.json").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # its progress bars print blank lines where stdout is not a terminal
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(tokenizer_dir / "tokenizer.json"))
    config = {"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": True}
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m training.titan_assets DATASETS_DIR", file=sys.stderr)
        return 2
    print(write_assets(Path(args[0]) / ASSETS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
