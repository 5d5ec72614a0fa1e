"""Turns one token stream (a "row") into pretraining examples (XLNET_REFERENCE.md §2).

Glossary: L seq_len, R reuse_len, P num_predict, T row length in tokens, C chunks per row.

Layout of an example:

    [ R reused tokens ][ A ][<sep>][ B ][<sep>][<cls>]
    segment ids: 0..0   0..0   0    1..1   1      2

Chunk c of a row starts at token c * R: its reused prefix is row[cR : cR + R] and A starts
right after it, so the memory built from chunk c is the text that precedes chunk c + 1.
A backward row is the forward row time-reversed (tokens and sentence ids), exactly as the
original builds it; its examples are built the same way from the reversed row.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import numpy as np

from xlnet_tf2 import special_ids
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.permutation import sample_ranks
from xlnet_tf2.data.span_sampling import sample_span_mask


@dataclasses.dataclass
class Example:
    """One pretraining example as stored on disk (all arrays int32)."""

    input_ids: np.ndarray         # [L]
    segment_ids: np.ndarray       # [L]
    target_positions: np.ndarray  # [P], ascending, padded with -1
    perm_rank: np.ndarray         # [L], see permutation.py
    stream_id: int
    chunk_index: int
    direction: int                # 0 forward, 1 backward
    pass_id: int
    is_next: int                  # A/B label: 1 if B is the text after A, 0 if random


def num_chunks(row_len: int, params: DataParams) -> int:
    """Examples per row: chunks c with c * R + L <= row_len."""
    if row_len < params.seq_len:
        return 0
    return (row_len - params.seq_len) // params.reuse_len + 1


def example_rng(seed: int, pass_id: int, direction: int, stream_id: int,
                chunk_index: int) -> np.random.Generator:
    """The random generator of one example, a pure function of its identity and the seed."""
    return np.random.default_rng([seed, pass_id, direction, stream_id, chunk_index, 0x584C4E])


def split_a_and_b(ids: np.ndarray, sent_ids: np.ndarray, begin: int, total: int,
                  rng: np.random.Generator) -> Optional[Tuple[np.ndarray, np.ndarray, int]]:
    """Chooses A (starting at `begin`) and B with len(A) + len(B) == total.

    With probability 1/2 (or when there is no sentence boundary in reach) B is a random span
    of the row extended to sentence boundaries (label 0); otherwise B is the text after A,
    A cut at a random sentence boundary (label 1). The longer of A and B is trimmed on its
    right until the total fits, as in the original `_split_a_and_b`.

    Args:
      ids: int [T] row tokens; sent_ids: int [T] sentence number of each token.
      begin: first token of A; total: len(A) + len(B).
      rng: the example's generator.

    Returns:
      (A, B, is_next) or None if the row ends before begin + total.
    """
    length = ids.shape[0]
    if begin + total >= length:
        return None
    # Sentence boundaries after `begin`: positions e with sent_ids[e] != sent_ids[e - 1].
    bounds = np.flatnonzero(sent_ids[begin + 1:] != sent_ids[begin:-1]) + begin + 1
    far = bounds[bounds - begin >= total]
    end = int(far[0]) if far.size else length
    cut_points = bounds[bounds < end]
    a_begin = begin
    if cut_points.size == 0 or rng.random() < 0.5:
        is_next = 0
        a_end = end if cut_points.size == 0 else int(rng.choice(cut_points))
        b_len = max(1, total - (a_end - a_begin))
        b_begin = int(rng.integers(0, length - 1 - b_len + 1))
        b_end = b_begin + b_len
        while b_begin > 0 and sent_ids[b_begin - 1] == sent_ids[b_begin]:
            b_begin -= 1
        while b_end < length - 1 and sent_ids[b_end - 1] == sent_ids[b_end]:
            b_end += 1
    else:
        is_next = 1
        a_end = int(rng.choice(cut_points))
        b_begin, b_end = a_end, end
    # Trim the longer side on its right, one token at a time in the original; the same
    # result in closed form: first level the longer side, then alternate (B first on ties).
    a_len, b_len = a_end - a_begin, b_end - b_begin
    excess = a_len + b_len - total
    if excess > 0:
        step = min(excess, abs(a_len - b_len))
        if a_len > b_len:
            a_len -= step
        else:
            b_len -= step
        excess -= step
        b_len -= (excess + 1) // 2
        a_len -= excess // 2
    return ids[a_begin:a_begin + a_len], ids[b_begin:b_begin + b_len], is_next


def build_example(ids: np.ndarray, sent_ids: np.ndarray, chunk_index: int, *,
                  params: DataParams, starts_word: np.ndarray, stream_id: int,
                  direction: int, pass_id: int) -> Example:
    """Builds chunk `chunk_index` of a row (already reversed if direction == 1)."""
    rng = example_rng(params.seed, pass_id, direction, stream_id, chunk_index)
    start = chunk_index * params.reuse_len
    reused = ids[start:start + params.reuse_len]
    split = split_a_and_b(ids, sent_ids, start + params.reuse_len, params.ab_len, rng)
    if split is None:
        raise ValueError(f"chunk {chunk_index} does not fit in a row of {ids.shape[0]} tokens")
    a, b, is_next = split
    sep, cls = [special_ids.SEP_ID], [special_ids.CLS_ID]
    input_ids = np.concatenate([reused, a, sep, b, sep, cls]).astype(np.int32)
    segment_ids = np.array([0] * (params.reuse_len + len(a) + 1) + [1] * (len(b) + 1) + [2],
                           dtype=np.int32)
    assert input_ids.shape[0] == params.seq_len, input_ids.shape

    reverse = direction == 1
    kw = dict(alpha=params.mask_alpha, beta=params.mask_beta, max_span=params.max_span,
              span_mode=params.span_mode, reverse=reverse)
    mask_reused = sample_span_mask(input_ids[:params.reuse_len], starts_word,
                                   params.num_predict_reused, rng, **kw)
    mask_new = sample_span_mask(input_ids[params.reuse_len:], starts_word,
                                params.num_predict_new, rng, **kw)
    is_masked = np.concatenate([mask_reused, mask_new])
    # <sep>/<cls> may be sampled but are never targets (they keep their rank; see masks.py).
    is_func = (input_ids == special_ids.SEP_ID) | (input_ids == special_ids.CLS_ID)
    positions = np.flatnonzero(is_masked & ~is_func).astype(np.int32)
    target_positions = np.full(params.num_predict, -1, dtype=np.int32)
    target_positions[:positions.size] = positions

    ranks = sample_ranks(params.seq_len, params.reuse_len, params.perm_size, rng)
    return Example(input_ids=input_ids, segment_ids=segment_ids,
                   target_positions=target_positions, perm_rank=ranks, stream_id=stream_id,
                   chunk_index=chunk_index, direction=direction, pass_id=pass_id,
                   is_next=is_next)


def row_examples(ids: np.ndarray, sent_ids: np.ndarray, *, params: DataParams,
                 starts_word: np.ndarray, stream_id: int, pass_id: int, direction: int):
    """Yields every chunk of one row in one direction, chunk 0 first."""
    if direction == 1:
        ids, sent_ids = ids[::-1], sent_ids[::-1]
    for chunk in range(num_chunks(ids.shape[0], params)):
        yield build_example(ids, sent_ids, chunk, params=params, starts_word=starts_word,
                            stream_id=stream_id, direction=direction, pass_id=pass_id)
