"""Trains the SentencePiece model of data_prep/train_sentencepiece.py from its settings.

The input files are checked first, with the same refusal as data preparation (one line naming
the file and line that is not valid UTF-8), and SentencePiece's own failures (a vocabulary too
large for the text, ...) become one line saying what to change.
"""

from __future__ import annotations

from xlnet_tf2.data.params import DataPrepError
from xlnet_tf2.prep.prep_config import SentencePieceConfig
from xlnet_tf2 import fileio
from xlnet_tf2.prep.text_sources import check_text_files, expand_inputs, total_bytes
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece


def train_vocabulary(config: SentencePieceConfig) -> str:
    """Writes PREFIX.model and PREFIX.vocab; returns the .model path.

    Raises:
      DataPrepError or TokenizerError naming the flag, file or line to change.
    """
    paths = expand_inputs(config.input)
    total_bytes(paths)  # all empty: one line naming them
    check_text_files(paths, "fix the file or remove it from --input.")
    if fileio.isdir(config.model_prefix):
        raise DataPrepError(f"--model_prefix={config.model_prefix} is a directory; pass a path "
                            "prefix such as DIR/spiece (DIR/spiece.model is written).")
    try:
        return train_sentencepiece(paths, vocab_size=config.vocab_size,
                                   model_prefix=config.model_prefix, lower=config.uncased,
                                   character_coverage=config.character_coverage,
                                   input_sentence_size=config.input_sentence_size)
    except RuntimeError as e:  # sentencepiece reports e.g. a vocabulary too large for the text
        if "sentences_.empty()" in str(e):
            raise DataPrepError(f"--input {', '.join(paths[:3])} holds no text (only blank "
                                "lines); pass files with text.") from None
        raise DataPrepError(f"SentencePiece failed: {' '.join(str(e).split())}. Lower "
                            "--vocab_size or add text.") from None
