"""The data parameters that fix what a prepared pretraining example looks like.

The same `DataParams` is recorded in `record_info.json` by data preparation and checked by
the input pipeline, so data and training can never silently disagree.
"""

from __future__ import annotations

import dataclasses

from xlnet_tf2.config_flags import check_declared, setting


class DataPrepError(ValueError):
    """Bad input or flags for data preparation; the message says what to change."""


SPAN_MODES = ("word", "original")


@dataclasses.dataclass(frozen=True)
class DataParams:
    """Parameters of the pretraining examples (docs/SEMANTICS.md#pretraining-examples); each
    field's help is its flag's in data_prep/create_tfrecords.py (xlnet_tf2/prep/prep_config.py).
    L is seq_len, R reuse_len, P num_predict (docs/GLOSSARY.md): ceil(P/2) targets in the
    reused half and floor(P/2) in the new half, before `<sep>`/`<cls>` are removed. A manifest
    records every field (to_dict)."""

    seq_len: int = setting(512, "Length L of every example in tokens.")
    reuse_len: int = setting(
        256, "Number R of leading tokens of an example that the next step of its stream keeps "
        "as memory; a stream advances by R tokens per example. The original requires "
        "seq_len / 2.")
    num_predict: int = setting(
        85, "Number of target tokens sampled per example (about 1/K of seq_len; the paper "
        "uses 85 of 512).")
    mask_alpha: int = setting(
        6, "A span of n units is placed in a window of n * mask_alpha / mask_beta tokens.")
    mask_beta: int = setting(
        1, "The divisor of a span's window: n * mask_alpha / mask_beta tokens (see "
        "--mask_alpha).")
    perm_size: int = setting(
        256, "Positions are permuted in blocks of this size (defaults to --reuse_len); it "
        "must divide reuse_len and seq_len - reuse_len.", default_from="reuse_len")
    bi_data: bool = setting(
        True, "Also write every stream read backwards, for bidirectional-data pretraining.")
    num_streams: int = setting(
        32, "Number of parallel token streams. Training needs num_streams to be a multiple "
        "of the streams it reads per step: the global batch, or half of it with --bi_data.")
    num_passes: int = setting(
        1, "Passes over the corpus; each pass re-samples A/B pairs, targets and "
        "factorization orders.")
    seed: int = setting(
        0, "Seed of every random choice; the same inputs and seed give byte-identical output "
        "for any number of workers.")
    uncased: bool = setting(
        False, "Lowercase the text before encoding (uncased models only).")
    span_mode: str = setting(
        "original", "How target spans are sampled: 'original' (default) is the original "
        "sampler exactly, spans of n subword pieces (its span-end bug); 'word' samples spans "
        "of n whole words (the paper's evident intent).", choices=SPAN_MODES)
    max_span: int = setting(
        5, "Longest span n of target units, drawn with p(n) proportional to 1/n (the "
        "original uses 5).")
    word_cache: bool = setting(
        True, "Tokenize with a per-word cache where it pays (default): each worker counts, "
        "batch by batch, what the cache saves and costs and uses it only while it saves more. "
        "Exact: the ids equal line-by-line encoding either way, so the prepared files are the "
        "same; --noword_cache never uses it (docs/DATA.md).")

    @property
    def new_len(self) -> int:
        """Length of the new (non-reused) half: L - R."""
        return self.seq_len - self.reuse_len

    @property
    def ab_len(self) -> int:
        """len(A) + len(B) = L - R - 3 (two <sep> and one <cls>)."""
        return self.seq_len - self.reuse_len - 3

    @property
    def num_predict_reused(self) -> int:
        return self.num_predict - self.num_predict // 2

    @property
    def num_predict_new(self) -> int:
        return self.num_predict // 2

    def __post_init__(self):
        check_declared(self)  # the settings' declared choices; `validate` checks the values

    @property
    def num_directions(self) -> int:
        return 2 if self.bi_data else 1

    def validate(self) -> None:
        """Raises DataPrepError naming the flag to change if the parameters cannot work."""
        def fail(msg):
            raise DataPrepError(msg)

        for name in ("seq_len", "reuse_len", "num_predict", "mask_alpha", "mask_beta",
                     "perm_size", "num_streams", "num_passes", "max_span"):
            if getattr(self, name) <= 0:
                fail(f"--{name} must be positive, got {getattr(self, name)}.")
        if self.seed < 0:
            fail(f"--seed must be >= 0, got {self.seed}.")
        if self.span_mode not in SPAN_MODES:
            fail(f"--span_mode must be one of {SPAN_MODES}, got {self.span_mode!r}.")
        if self.reuse_len >= self.seq_len - 4:
            fail(f"--reuse_len={self.reuse_len} leaves no room for A, B, two <sep> and <cls> "
                 f"in --seq_len={self.seq_len}; use reuse_len <= seq_len - 5 "
                 f"(the original uses seq_len / 2).")
        if self.reuse_len % self.perm_size or self.new_len % self.perm_size:
            fail(f"--perm_size={self.perm_size} must divide both --reuse_len={self.reuse_len} "
                 f"and seq_len - reuse_len = {self.new_len}: the order is permuted within "
                 "blocks of perm_size, separately in the reused and the new half.")
        if self.num_predict_reused > self.reuse_len or self.num_predict_new > self.new_len:
            fail(f"--num_predict={self.num_predict} asks for more targets than positions: "
                 f"{self.num_predict_reused} of {self.reuse_len} reused and "
                 f"{self.num_predict_new} of {self.new_len} new positions.")
        if self.mask_alpha < self.mask_beta:
            fail(f"--mask_alpha={self.mask_alpha} must be >= --mask_beta={self.mask_beta}: the "
                 "window of a span of n tokens is n * alpha / beta tokens.")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DataParams":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise DataPrepError(f"Unknown data parameters {sorted(unknown)}.")
        return cls(**d)
