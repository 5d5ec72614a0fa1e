"""The data parameters that fix what a prepared pretraining example looks like.

The same `DataParams` is recorded in `record_info.json` by data preparation and checked by
the input pipeline, so data and training can never silently disagree.
"""

from __future__ import annotations

import dataclasses


class DataPrepError(ValueError):
    """Bad input or flags for data preparation; the message says what to change."""


SPAN_MODES = ("word", "original")


@dataclasses.dataclass(frozen=True)
class DataParams:
    """Parameters of the pretraining examples (XLNET_REFERENCE.md §2).

    seq_len: example length L.
    reuse_len: R, the leading positions cached as memory for the next step of the stream.
      Consecutive examples of a stream advance by R tokens.
    num_predict: P, the number of sampled targets per example (ceil(P/2) in the reused half,
      floor(P/2) in the new half, before `<sep>`/`<cls>` are removed).
    mask_alpha, mask_beta: a span of n units is placed in a window of n * alpha / beta tokens.
    perm_size: positions are permuted within consecutive blocks of this size, blocks in
      natural order; must divide both R and L - R.
    bi_data: also write every stream read backwards (time-reversed).
    num_streams: number of parallel token streams the corpus is cut into.
    num_passes: passes over the corpus; each re-samples A/B, targets and orders.
    seed: every random choice derives from it.
    uncased: lowercase text before encoding.
    span_mode: "original" (default: the original sampler exactly, spans of n subword pieces)
      or "word" (spans of n whole words, the paper's evident intent).
    max_span: longest span n (the original uses 5).
    word_cache: tokenize with the word cache of `encode.BatchEncoder` (default). Both modes
      give exactly `encode_ids` line by line; the cache is faster once words repeat (large
      corpora) and slower on the first megabytes of new text (docs/DATA.md).
    """

    seq_len: int = 512
    reuse_len: int = 256
    num_predict: int = 85
    mask_alpha: int = 6
    mask_beta: int = 1
    perm_size: int = 256
    bi_data: bool = True
    num_streams: int = 32
    num_passes: int = 1
    seed: int = 0
    uncased: bool = False
    span_mode: str = "original"
    max_span: int = 5
    word_cache: bool = True

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
