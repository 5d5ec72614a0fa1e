"""The pretraining objective's two random draws per example, keyed by `hashrand`: which
positions are targets, and the factorization order they are predicted in.

Letters (docs/GLOSSARY.md): L seq_len, R reuse_len, B rows of a batch; `perm_size` has no letter.

Targets (partial prediction, docs/SEMANTICS.md#span-sampling): whole-word spans in each half,
the original's `_sample_mask` vectorized over examples (`sample_span_masks`, which gives the
algorithm, its two modes and how the draws are keyed). Drawn once, at data preparation.

Factorization order (docs/SEMANTICS.md#factorization-order): one rank per position, `rank[i]`
the place of position i in the order. The reused half [0, R) and the new half [R, L) are
permuted separately and keep their natural order: ranks of the reused half are 0..R-1, of the
new half R..L-1. Within a half, positions are permuted inside consecutive blocks of perm_size
positions, blocks in natural order. With perm_size = R (the default and the paper setup) that
is one uniform permutation per half, as in the original. With a smaller perm_size the original
applies the *same* shuffle to every block; we draw each block's shuffle independently. Drawn at
preparation (`sample_ranks_batch`) or again each epoch in the input pipeline (`online_ranks`).

The rank of a position says nothing about whether it is a target; tasks/objective.py
`two_stream_masks` combines the two inside the step. A rank vector is an [L] int array on disk
instead of an [L, L] mask. Nothing here imports TensorFlow at module level: data preparation
runs without it.
"""

from __future__ import annotations

import numpy as np

from xlnet_tf2.data import hashrand

# The original's set, written '!"#$%&\"()*+,-./:;?@[\\]^_`{|}~' in a single-quoted Python
# string: the double quote appears twice and ', <, = and > are missing. "<" still counts
# through the `startswith("<")` test; "'", "=" and ">" alone are *not* start pieces.
ORIGINAL_SPECIAL_PIECES = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')


def is_start_piece(piece: str) -> bool:
    """True if `piece` begins a word, exactly as the original `_is_start_piece`."""
    return (piece.startswith("\u2581") or piece.startswith("<")
            or piece in ORIGINAL_SPECIAL_PIECES)


def start_piece_table(tokenizer) -> np.ndarray:
    """bool [V]: entry v says whether piece id v begins a word."""
    return np.array([is_start_piece(tokenizer.id_to_piece(i))
                     for i in range(tokenizer.vocab_size)], dtype=bool)


def span_probabilities(max_span: int) -> np.ndarray:
    """Cumulative p(n) ~ 1/n over 1..max_span, float64 [max_span] (last entry 1)."""
    probs = 1.0 / np.arange(1, max_span + 1)
    probs /= probs.sum()
    cdf = np.cumsum(probs)
    return cdf / cdf[-1]


def draw_span_length(u: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """n from uniforms u (numpy `choice(p=...)`'s inverse-CDF rule): int64, 1..len(cdf)."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.shape[0] - 1) + 1


def sample_span_masks(halves: np.ndarray, starts_word: np.ndarray, goal: int,
                      keys: np.ndarray, *, span_tag: int, topup_tag: int, alpha: int = 6,
                      beta: int = 1, max_span: int = 5, span_mode: str = "original",
                      reverse=False, top_up: bool = True) -> np.ndarray:
    """Samples exactly `goal` target positions in each of `rows` halves.

    Names (the letters of docs/GLOSSARY.md mean other things): `rows` the halves sampled
    together, `half_len` the length of a half, `goal` the targets per half, n a span length
    in units (1..max_span, p(n) proportional to 1/n). A *unit* is one subword piece in
    "original" mode and a whole word in "word" mode; a *start piece* begins a word (see
    `is_start_piece`).

    The original algorithm, per half (reversed halves are flipped to reading order first and
    the mask flipped back):

        cur = 0, count = 0
        while cur < half_len and count < goal:
            n = draw from 1..max_span with p(n) ~ 1/n;  n = min(n, goal - count)
            window = n * alpha // beta;  left = uniform integer in [0, window)
            begin = first start piece at or after cur + left      (stop if none)
            end = begin + n                                       (stop if end >= half_len)
            mark [begin, end);  count += n;  cur = end + window - left
        top up with uniformly drawn positions, skipping marked ones, until count == goal

    Its span-end loop tests the span's *first* piece on every step instead of the current
    one, so an "n-gram" is n subword pieces whatever the word boundaries.
    `span_mode="original"` (the default) reproduces exactly that. `span_mode="word"`
    implements the evident intent: `end` is the start of the (n+1)-th word after `begin`
    (stop if there is none), cut to `begin + goal - count`. Statistics of both modes:
    docs/DATA.md.

    The loop runs in lock-step over all halves with numpy (one iteration per span, at most
    goal iterations); the k-th span of a half uses draws (tag, 2k) and (tag, 2k + 1) of its
    example key and the j-th top-up candidate draw (tag', j), so the result is a pure function
    of the key, independent of how halves are batched. `reference_sample_mask` in
    tests/data/test_span_sampling_reference.py runs the loop above one span at a time on the
    same draws.

    Args:
      halves: int [rows, half_len], the token ids of each half.
      starts_word: bool [V], `start_piece_table` of the vocabulary.
      goal: positions to mark per half (<= half_len).
      keys: uint64 [rows], the example key of each half (hashrand.example_keys).
      span_tag, topup_tag: hashrand tags of the span draws and the top-up draws.
      alpha, beta: the window of a span of n units is n * alpha // beta tokens.
      max_span: longest span in units.
      span_mode: "original" or "word" (above).
      reverse: bool or bool [rows]: the half is time-reversed text; spans are sampled in reading
        order and the mask is reversed back.
      top_up: fill every half up to goal with single positions (off only to measure spans).

    Returns:
      bool [rows, half_len] with exactly `goal` True entries per row (at most `goal` without
      top_up).
    """
    halves = np.asarray(halves)
    num, length = halves.shape
    reverse = np.broadcast_to(np.asarray(reverse, dtype=bool), (num,))
    forward = _flipped(halves, reverse)
    is_start = starts_word[forward]                                        # [rows, half_len]
    rows = np.arange(num)
    positions = np.arange(length + 1)
    # next_start[r, i]: first start piece at or after i (half_len if none); i in 0..half_len.
    candidates = np.where(is_start, positions[None, :length], length)
    next_start = np.full((num, length + 1), length, dtype=np.int64)
    next_start[:, :length] = np.minimum.accumulate(candidates[:, ::-1], axis=1)[:, ::-1]
    if span_mode == "word":
        # start_rank[r, i]: start pieces before i; start_pos[r, k]: the k-th start piece.
        start_rank = np.zeros((num, length + 1), dtype=np.int64)
        np.cumsum(is_start, axis=1, out=start_rank[:, 1:])
        num_starts = start_rank[:, -1]
        order = np.argsort(~is_start, axis=1, kind="stable")
        start_pos = np.concatenate([order, np.full((num, 1), length)], axis=1)
    elif span_mode != "original":
        raise ValueError(f"span_mode must be 'original' or 'word', got {span_mode!r}")
    cdf = span_probabilities(max_span)
    ratio_alpha, ratio_beta = int(alpha), int(beta)

    cur = np.zeros(num, dtype=np.int64)
    count = np.zeros(num, dtype=np.int64)
    active = np.full(num, goal > 0 and length > 0)
    span_rows, span_begin, span_end = [], [], []
    # A half has at most min(goal, half_len) spans (each marks >= 1 position): draw them all at
    # once.
    max_steps = max(min(goal, length), 0)
    draws = hashrand.uniform(keys, span_tag, np.arange(2 * max_steps)) if max_steps else None
    lengths_all = draw_span_length(draws[:, 0::2], cdf) if max_steps else None
    step = 0
    while active.any():
        idx = rows[active]
        n = np.minimum(lengths_all[idx, step], goal - count[idx])
        window = (n * ratio_alpha) // ratio_beta
        left = (draws[idx, 2 * step + 1] * window).astype(np.int64)
        begin = next_start[idx, np.minimum(cur[idx] + left, length)]
        if span_mode == "original":
            end = begin + n
            ok = (begin < length) & (end < length)
        else:
            rank = start_rank[idx, np.minimum(begin, length)] + n
            end = np.where(rank < num_starts[idx],
                           start_pos[idx, np.minimum(rank, length)], length)
            ok = (begin < length) & (end < length)
            end = np.minimum(end, begin + goal - count[idx])
        good = idx[ok]
        span_rows.append(good)
        span_begin.append(begin[ok])
        span_end.append(end[ok])
        count[good] += end[ok] - begin[ok]
        cur[good] = end[ok] + window[ok] - left[ok]
        active[idx[~ok]] = False
        active[good] = (cur[good] < length) & (count[good] < goal)
        step += 1

    mask = _fill_spans(num, length, np.concatenate(span_rows) if span_rows else rows[:0],
                       np.concatenate(span_begin) if span_begin else rows[:0],
                       np.concatenate(span_end) if span_end else rows[:0])
    if top_up:
        _top_up(mask, count, goal, keys, topup_tag)
    return _flipped(mask, reverse)


def _flipped(rows: np.ndarray, reverse: np.ndarray) -> np.ndarray:
    """[rows, half_len] `rows` with the rows where reverse[r] time-reversed (a view if all or
    none)."""
    if reverse.all():
        return rows[:, ::-1]
    if not reverse.any():
        return rows
    return np.where(reverse[:, None], rows[:, ::-1], rows)


def _fill_spans(num: int, length: int, rows: np.ndarray, begin: np.ndarray,
                end: np.ndarray) -> np.ndarray:
    """bool [num, length] with [begin, end) of each span's row set (spans do not overlap)."""
    width = length + 1
    delta = (np.bincount(rows * width + begin, minlength=num * width)
             - np.bincount(rows * width + end, minlength=num * width))
    return np.cumsum(delta.reshape(num, width)[:, :length], axis=1) > 0


def _top_up(mask: np.ndarray, count: np.ndarray, goal: int, keys: np.ndarray,
            tag: int) -> None:
    """Marks goal - count[r] more positions of each row, in place.

    Candidate j of a row is floor(uniform(key, tag, j) * half_len); a candidate is taken if it
    is not marked yet (by a span or an earlier candidate), as the original's rejection loop. The
    loop runs over candidates, vectorized over the rows that still need some.
    """
    num, length = mask.shape
    need = goal - count
    todo = np.flatnonzero(need > 0)
    if todo.size == 0:
        return
    draws = 2 * goal + 16
    cand = (hashrand.uniform(keys[todo], tag, np.arange(draws)) * length).astype(np.int64)
    left = need[todo]
    for j in range(draws):
        live = np.flatnonzero(left > 0)
        if live.size == 0:
            return
        rows, pos = todo[live], cand[live, j]
        take = ~mask[rows, pos]
        mask[rows[take], pos[take]] = True
        left[live[take]] -= 1
    for m in np.flatnonzero(left > 0):  # rare: continue the same candidate sequence
        r = todo[m]
        missing = int(left[m])
        j = draws
        while missing:
            pos = int(hashrand.uniform(keys[r:r + 1], tag, np.arange(j, j + 1))[0, 0] * length)
            if not mask[r, pos]:
                mask[r, pos] = True
                missing -= 1
            j += 1


def sample_span_mask(ids: np.ndarray, starts_word: np.ndarray, goal: int, key: int, *,
                     span_tag: int = hashrand.TAG_SPANS_REUSED,
                     topup_tag: int = hashrand.TAG_TOPUP_REUSED,
                     alpha: int = 6, beta: int = 1, max_span: int = 5,
                     span_mode: str = "original", reverse: bool = False,
                     top_up: bool = True) -> np.ndarray:
    """One half: bool [half_len]; see `sample_span_masks`. `key` is an integer example key."""
    keys = np.array([key], dtype=np.uint64)
    return sample_span_masks(np.asarray(ids)[None], starts_word, goal, keys,
                             span_tag=span_tag, topup_tag=topup_tag, alpha=alpha, beta=beta,
                             max_span=max_span, span_mode=span_mode, reverse=reverse,
                             top_up=top_up)[0]


# Factorization orders of pretraining (--factorization_order): "permutation" is XLNet's
# (the stored or online ranks, non-targets visible to all); "left_to_right" is the identity
# order with every position ranked, i.e. a plain left-to-right (causal) language model
# predicting the same targets: the objective the permutation one generalizes.
# tasks/objective.py applies them; they are named here, not there, so flag definitions need
# no TensorFlow (fast --help).
FACTORIZATION_ORDERS = ("permutation", "left_to_right")


def sample_ranks_batch(keys: np.ndarray, seq_len: int, perm_size: int) -> np.ndarray:
    """Offline sampling for C examples: int32 [C, L], each row a permutation of 0..L-1 with
    the block structure above (blocks of perm_size positions never straddle the reused part's
    end R: perm_size divides R).

    Position i of example c gets the 64-bit key `hashrand.bits(keys[c], TAG_PERM, i)`; the
    stable argsort of the keys inside each block of perm_size positions is a uniformly random
    permutation of the block (a pure function of the example key).
    """
    keys = np.asarray(keys, np.uint64)
    draws = hashrand.bits(keys, hashrand.TAG_PERM, np.arange(seq_len))       # [C, L]
    blocks = draws.reshape(keys.shape[0], seq_len // perm_size, perm_size)
    # Ties between 64-bit keys have probability ~ perm_size^2 / 2^65; the sort is deterministic
    # anyway.
    ranks = np.argsort(blocks, axis=-1).astype(np.int32)
    ranks += np.arange(0, seq_len, perm_size, dtype=np.int32)[None, :, None]
    return ranks.reshape(keys.shape[0], seq_len)


def online_ranks(row_keys, seq_len: int, perm_size: int):
    """In-graph re-sampling of the order: int32 [B, L] from string row_keys [B].

    Every position gets a pseudorandom 62-bit key, the fingerprint of (row key, position);
    sorting the keys inside each block of perm_size positions gives a uniformly random permutation
    that depends only on the row key, never on the topology or when the row is read.
    """
    import tensorflow as tf  # in the input pipeline only; data prep imports no TF

    positions = tf.strings.as_string(tf.range(seq_len))                       # [L]
    num_rows = tf.shape(row_keys)[0]
    keys = tf.strings.join([tf.tile(row_keys[:, None], [1, seq_len]),
                            tf.tile(positions[None, :], [num_rows, 1])], ":")  # [B, L]
    keys = tf.strings.to_hash_bucket_fast(keys, 2**62)                          # [B, L]
    keys = tf.reshape(keys, [-1, seq_len // perm_size, perm_size])  # [B, L/perm_size, perm_size]
    ranks = tf.argsort(tf.argsort(keys, axis=-1, stable=True), axis=-1, stable=True)
    block_start = tf.range(0, seq_len, perm_size)[None, :, None]               # [1, L/perm_size, 1]
    return tf.reshape(ranks + block_start, [-1, seq_len])
