"""The settings of the data-preparation commands, as config trees (xlnet_tf2/config_flags.py):
their flags, help, defaults and checks are written here once.

    PrepConfig            data_prep/create_tfrecords.py
      input, tfds_*, spm_model, output_dir, overwrite, eval_fraction, eval_input,
      skip_bad_lines
      params  DataParams  what an example looks like (recorded in record_info.json)
    SentencePieceConfig   data_prep/train_sentencepiece.py

Importing this module imports neither TensorFlow nor Apache Beam (`--help` stays fast).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_non_negative,
                                    check_positive, section, setting)
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.special_ids import SPECIAL_PIECES


def check_prep_settings(params: DataParams, *, output_dir: Optional[str],
                        input_patterns: Sequence[str], tfds_name: Optional[str],
                        eval_fraction: float, eval_input: Sequence[str]) -> None:
    """The checks of data preparation's settings that need no file (the command's config and
    `beam_pipeline.preflight` both run them).

    Raises:
      DataPrepError naming the flag to change.
    """
    params.validate()
    if not output_dir:
        raise DataPrepError("--output_dir is required.")
    if bool(input_patterns) == bool(tfds_name):
        raise DataPrepError("Pass exactly one of --input (text files) and --tfds_name.")
    if not 0.0 <= eval_fraction < 1.0:
        raise DataPrepError(f"--eval_fraction must be in [0, 1), got {eval_fraction}.")
    if eval_fraction and eval_input:
        raise DataPrepError("Pass at most one of --eval_fraction and --eval_input.")


@dataclasses.dataclass(frozen=True)
class PrepConfig:
    """Settings of one data-preparation run (data_prep/create_tfrecords.py)."""

    input: Tuple[str, ...] = setting(
        (), "Text files or globs (comma-separated) in the original format: one sentence per "
        "line, a blank line ends a document, <eop> allowed.")
    tfds_name: Optional[str] = setting(
        None, "A TensorFlow Datasets text dataset (name, name/config, name:version) to read "
        "instead of --input; it must be prepared (`tfds build`) in --tfds_data_dir: data "
        "preparation does not download.")
    tfds_split: str = setting(
        "train", "The TFDS split to read, e.g. 'train', 'train[:10%]', 'train+validation'.")
    tfds_text_key: str = setting(
        "text", "The TFDS feature holding a document's text (one record, one document); its "
        "lines are the sentences.")
    tfds_data_dir: Optional[str] = setting(
        None, "The TensorFlow Datasets data directory holding --tfds_name (default: TFDS's "
        "own, ~/tensorflow_datasets or $TFDS_DATA_DIR).")
    spm_model: Optional[str] = setting(
        None, "The SentencePiece model (from data_prep/train_sentencepiece.py) used to encode "
        "the text.")
    output_dir: Optional[str] = setting(
        None, "Directory for the TFRecord files and record_info.json.")
    overwrite: bool = setting(
        False, "Replace prepared data already in --output_dir; the old data stays until the new "
        "is complete (it is built beside it, then swapped in).")
    eval_fraction: float = setting(
        0.0, "Hold out this fraction of the documents (chosen by a hash of --seed and the "
        "document) into OUTPUT_DIR/eval, which pretraining evaluates on by default.")
    eval_input: Tuple[str, ...] = setting(
        (), "Or: text files (globs) prepared into OUTPUT_DIR/eval as the held-out split, with "
        "the same parameters.")
    skip_bad_lines: bool = setting(
        False, "Drop and count lines that are not valid UTF-8 instead of stopping at the "
        "first one.")
    params: DataParams = section(DataParams)

    def __post_init__(self):
        check_declared(self)
        check_prep_settings(self.params, output_dir=self.output_dir, input_patterns=self.input,
                            tfds_name=self.tfds_name, eval_fraction=self.eval_fraction,
                            eval_input=self.eval_input)


@dataclasses.dataclass(frozen=True)
class SentencePieceConfig:
    """Settings of training the SentencePiece model (data_prep/train_sentencepiece.py)."""

    input: Tuple[str, ...] = setting(
        (), "Text files or globs (comma-separated) to learn the pieces from; each line is "
        "normalized with preprocess_text first.")
    vocab_size: int = setting(
        32000, f"Number of pieces, the {len(SPECIAL_PIECES)} special pieces included.")
    model_prefix: str = setting(
        None, "Output path prefix; PREFIX.model and PREFIX.vocab are written.", required=True)
    uncased: bool = setting(
        False, "Lowercase the text first (for an uncased model; the released XLNet models are "
        "cased).")
    character_coverage: float = setting(
        0.99995, "Fraction of characters the model covers; the rest map to <unk>.")
    input_sentence_size: int = setting(
        10_000_000, "At most this many lines, sampled at random, are used for training.")

    def __post_init__(self):
        check_declared(self)
        if self.vocab_size <= len(SPECIAL_PIECES):
            raise RunConfigError(f"--vocab_size={self.vocab_size} leaves no room beside the "
                                 f"{len(SPECIAL_PIECES)} special pieces.")
        if not 0.0 < self.character_coverage <= 1.0:
            raise RunConfigError(f"--character_coverage must be in (0, 1], got "
                                 f"{self.character_coverage}.")
        check_positive(self, "input_sentence_size")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """The docstring corpus of the demo and the tests (data_prep/build_corpus.py)."""

    output: str = setting(
        None, "The text file to write, in the pretraining input format.", required=True)
    min_bytes: int = setting(
        1_000_000, "Fail if the standard library yields less text than this many bytes.")
    max_bytes: Optional[int] = setting(
        None, "Stop once this much text is written, in bytes (default: all of it).")

    def __post_init__(self):
        check_declared(self)
        check_non_negative(self, "min_bytes")
        check_positive(self, "max_bytes")
        if self.max_bytes is not None and self.max_bytes < self.min_bytes:
            raise RunConfigError(f"--max_bytes={self.max_bytes} is below --min_bytes="
                                 f"{self.min_bytes}: the corpus could never be long enough; "
                                 "raise --max_bytes or lower --min_bytes.")
