"""Span target sampling for partial prediction (XLNET_REFERENCE.md §2, original `_sample_mask`).

Glossary: n span length in units (1..max_span, p(n) proportional to 1/n); a *unit* is a whole
word in "word" mode and one subword piece in "original" mode; "start piece" is a piece that
begins a word (starts with the SentencePiece space marker "▁", is a `<...>` piece, or is one
ASCII punctuation character).

The original span-end loop tests the *start* piece of the span on every step instead of the
current piece, so its "n-gram" is n subword pieces whatever the word boundaries. `span_mode=
"original"` reproduces that; `span_mode="word"` (our default) implements the evident intent,
spans of n whole words. In "word" mode a span longer (in pieces) than the targets still
missing is cut to that number, so the count is exact in both modes.
"""

from __future__ import annotations

import string

import numpy as np

_PUNCTUATION = frozenset(string.punctuation)


def is_start_piece(piece: str) -> bool:
    """True if `piece` begins a word (the original `_is_start_piece`)."""
    return piece.startswith("\u2581") or piece.startswith("<") or piece in _PUNCTUATION


def start_piece_table(tokenizer) -> np.ndarray:
    """bool [V]: entry v says whether piece id v begins a word."""
    return np.array([is_start_piece(tokenizer.id_to_piece(i))
                     for i in range(tokenizer.vocab_size)], dtype=bool)


def sample_span_mask(ids: np.ndarray, starts_word: np.ndarray, goal: int,
                     rng: np.random.Generator, *, alpha: int = 6, beta: int = 1,
                     max_span: int = 5, span_mode: str = "word",
                     reverse: bool = False, top_up: bool = True) -> np.ndarray:
    """Samples exactly `goal` target positions of `ids` in spans.

    Args:
      ids: int [T], token ids of one half of an example.
      starts_word: bool [V], `start_piece_table` of the vocabulary.
      goal: number of positions to mark (<= T).
      rng: the example's random generator.
      alpha, beta: the window of a span of n units is n * alpha // beta tokens; the span sits at
        a random offset in it and sampling moves past the window.
      max_span: longest span in units.
      span_mode: "word" or "original" (see module docstring).
      reverse: `ids` is time-reversed text; spans are sampled on the forward text and the mask
        reversed back, so word starts are detected in reading order.
      top_up: fill the count up to `goal` with random single positions when the spans run
        out (always on in data preparation; off only to measure the spans themselves).

    Returns:
      bool [T], exactly `goal` True entries (at most `goal` without top_up).
    """
    ids = np.asarray(ids)
    if reverse:
        ids = ids[::-1]
    length = ids.shape[0]
    is_start = starts_word[ids]
    mask = np.zeros(length, dtype=bool)
    lengths = np.arange(1, max_span + 1)
    probs = 1.0 / lengths
    probs /= probs.sum()
    count = 0
    cur = 0
    while cur < length and count < goal:
        n = min(int(rng.choice(lengths, p=probs)), goal - count)
        ctx_size = (n * alpha) // beta
        left_ctx = int(rng.integers(ctx_size))
        right_ctx = ctx_size - left_ctx
        begin = cur + left_ctx
        while begin < length and not is_start[begin]:
            begin += 1
        if begin >= length:
            break
        end = begin + 1
        units = 1
        while end < length:
            # "original": the bug tests the start piece, so every piece counts as a unit.
            if span_mode == "original" or is_start[end]:
                units += 1
                if units > n:
                    break
            end += 1
        if end >= length:
            break
        end = min(end, begin + goal - count)
        mask[begin:end] = True
        count += end - begin
        cur = end + right_ctx
    if top_up and count < goal:
        # Top up with single random positions, as the original does.
        free = np.flatnonzero(~mask)
        mask[rng.choice(free, size=goal - count, replace=False)] = True
    if reverse:
        mask = mask[::-1]
    return mask
