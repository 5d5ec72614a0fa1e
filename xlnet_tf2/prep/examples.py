"""Turns one token stream (a "row") into pretraining examples (docs/SEMANTICS.md#pretraining-examples).

Letters (docs/GLOSSARY.md): L seq_len, R reuse_len, P num_predict; `chunks` the chunks of the
row built together, `stream_len` the row's length in tokens, `num_bounds` its sentence
boundaries.

Layout of an example:

    [ R reused tokens ][ A ][<sep>][ B ][<sep>][<cls>]
    segment ids: 0..0   0..0   0    1..1   1      2

Chunk c of a row starts at token c * R: its reused prefix is row[cR : cR + R] and A starts
right after it, so the memory built from chunk c is the text that precedes chunk c + 1.
A backward row is the forward row time-reversed (tokens and sentence ids), exactly as the
original builds it; its examples are built the same way from the reversed row.

Everything is vectorized over the chunks of a row (numpy), and every random choice of chunk c
is a counter-based draw from its key `hashrand.example_keys(seed, pass, direction, stream, c)`,
so building chunks one at a time or all at once gives the same bytes. Sentence boundaries are
found by binary search, so the cost is linear in stream_len whatever the sentence (line)
lengths.
"""

from __future__ import annotations

from typing import Dict, Iterator

import numpy as np

from xlnet_tf2 import special_ids
from xlnet_tf2.data import hashrand
from xlnet_tf2.data.objective_sampling import sample_ranks_batch, sample_span_masks
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.records import Example

# Chunks built per numpy batch: bounds memory (about 40 bytes x L per chunk) for long rows.
CHUNK_BATCH = 1024


def num_chunks(row_len: int, params: DataParams) -> int:
    """Examples per row: chunks c with c * R + L <= row_len."""
    if row_len < params.seq_len:
        return 0
    return (row_len - params.seq_len) // params.reuse_len + 1


def sentence_bounds(sent_ids: np.ndarray) -> np.ndarray:
    """int64 [num_bounds]: positions e with sent_ids[e] != sent_ids[e - 1], ascending."""
    sent_ids = np.asarray(sent_ids)
    return np.flatnonzero(sent_ids[1:] != sent_ids[:-1]).astype(np.int64) + 1


def split_a_and_b(bounds: np.ndarray, length: int, begins: np.ndarray, total: int,
                  keys: np.ndarray) -> Dict[str, np.ndarray]:
    """Chooses A and B for the examples (chunks) of one row; len(A) + len(B) == total each.

    The original `_split_a_and_b`: the cut points are the sentence boundaries e with
    begin < e < begin + total; `end` is the first boundary at or after begin + total (or
    stream_len).
    With probability 1/2, or when there is no cut point, B is a random span (label 0): A ends
    at a random cut point (or at `end`), B has the remaining length, starts at a uniform
    position in [0, stream_len - 1 - len(B)] and is extended to sentence boundaries (never
    past stream_len - 1). Otherwise (label 1) A ends at a random cut point and B runs from
    there to `end`.
    The longer side is then trimmed on its right until the total fits (one token at a time
    in the original; here in closed form: level the longer side, then alternate, B first).

    Args:
      bounds: int64 [num_bounds] sentence boundaries of the row (`sentence_bounds`).
      length: stream_len, the row length.
      begins: int64 [chunks] first token of A; each begins[c] + total < stream_len.
      total: len(A) + len(B).
      keys: uint64 [chunks] example keys.

    Returns:
      {"a_begin", "a_len", "b_begin", "b_len", "is_next"}: int64 [chunks] each.
    """
    begins = np.asarray(begins, np.int64)
    num_bounds = bounds.shape[0]
    padded = np.append(bounds, length).astype(np.int64)                 # [num_bounds + 1]
    lo = np.searchsorted(bounds, begins + 1, side="left")
    hi = np.searchsorted(bounds, begins + total, side="left")
    end = padded[hi]
    num_cuts = hi - lo
    u = hashrand.uniform(keys, hashrand.TAG_AB, np.arange(3))           # [chunks, 3]
    has_cut = num_cuts > 0
    is_next = has_cut & (u[:, 0] >= 0.5)
    cut = padded[lo + np.minimum((u[:, 1] * num_cuts).astype(np.int64),
                                 np.maximum(num_cuts - 1, 0))]
    a_end = np.where(has_cut, cut, end)
    # Label 0: a random B of the remaining length, extended to sentence boundaries.
    rand_len = np.maximum(1, total - (a_end - begins))
    rand_begin = (u[:, 2] * (length - rand_len)).astype(np.int64)
    rand_end = rand_begin + rand_len
    k = np.searchsorted(bounds, rand_begin, side="right") - 1
    rand_begin = np.where(k >= 0, bounds[np.maximum(k, 0)] if num_bounds else 0, 0)
    j = np.searchsorted(bounds, rand_end, side="left")
    rand_end = np.minimum(padded[j], length - 1)
    b_begin = np.where(is_next, a_end, rand_begin)
    b_end = np.where(is_next, end, rand_end)
    a_len = a_end - begins
    b_len = b_end - b_begin
    # Trim the longer side on its right until the total fits.
    excess = np.maximum(a_len + b_len - total, 0)
    step = np.minimum(excess, np.abs(a_len - b_len))
    a_longer = a_len > b_len
    a_len = a_len - np.where(a_longer, step, 0)
    b_len = b_len - np.where(a_longer, 0, step)
    excess = excess - step
    b_len = b_len - (excess + 1) // 2
    a_len = a_len - excess // 2
    return {"a_begin": begins, "a_len": a_len, "b_begin": b_begin, "b_len": b_len,
            "is_next": is_next.astype(np.int64)}


def build_examples(ids: np.ndarray, sent_ids: np.ndarray, chunks: np.ndarray, *,
                   params: DataParams, starts_word: np.ndarray, stream_id: int,
                   direction: int, pass_id: int,
                   bounds: np.ndarray = None) -> Dict[str, np.ndarray]:
    """Builds the given chunks of a row (already reversed if direction == 1).

    Args:
      ids: int [stream_len] row tokens; sent_ids: int [stream_len] sentence number of each
        token.
      chunks: int [chunks], the chunk indices (each with c * R + L <= stream_len).
      params, starts_word: data parameters and the start-piece table.
      stream_id, direction, pass_id: the examples' identity (and random keys).
      bounds: `sentence_bounds(sent_ids)` if already computed.

    Returns:
      {"input_ids" int32 [chunks, L], "segment_ids" int32 [chunks, L], "target_positions"
      int32 [chunks, P] (ascending, -1 padded), "perm_rank" int32 [chunks, L], "is_next"
      int32 [chunks], "chunk_index" int32 [chunks]}.
    """
    L, R = params.seq_len, params.reuse_len
    chunks = np.asarray(chunks, np.int64)
    length = ids.shape[0]
    if chunks.size and int(chunks.max()) * R + L > length:
        raise ValueError(f"chunk {int(chunks.max())} does not fit in a row of {length} tokens")
    if bounds is None:
        bounds = sentence_bounds(sent_ids)
    keys = hashrand.example_keys(params.seed, pass_id, direction, stream_id, chunks)
    starts = chunks * R
    split = split_a_and_b(bounds, length, starts + R, params.ab_len, keys)
    a_len, b_begin, b_len = split["a_len"], split["b_begin"], split["b_len"]

    # Source index of every position: reused prefix, A, <sep>, B, <sep>, <cls>; position p
    # of the prefix and A reads row[start + p], of B row[b_begin + p - a_stop - 1] (the
    # <sep> and <cls> slots read a clipped index and are overwritten).
    index_type = np.int32 if length < 2 ** 31 else np.int64
    p = np.arange(L, dtype=index_type)[None, :]
    a_stop = R + a_len                               # [chunks] position of the first <sep>
    if chunks.size:
        assert np.all(a_stop + 1 + b_len == L - 2), "len(A) + len(B) must be L - R - 3"
    in_b = p > a_stop[:, None].astype(index_type)    # [chunks, L]
    source = p + np.where(in_b, (b_begin - a_stop - 1)[:, None],
                          starts[:, None]).astype(index_type)
    np.clip(source, 0, length - 1, out=source)
    input_ids = ids[source].astype(np.int32, copy=False)
    input_ids[np.arange(chunks.size), a_stop] = special_ids.SEP_ID
    input_ids[:, L - 2] = special_ids.SEP_ID
    input_ids[:, L - 1] = special_ids.CLS_ID
    segment_ids = in_b.astype(np.int32)
    segment_ids[:, L - 1] = 2

    reverse = direction == 1
    kw = dict(starts_word=starts_word, keys=keys, alpha=params.mask_alpha,
              beta=params.mask_beta, max_span=params.max_span, span_mode=params.span_mode,
              reverse=reverse)
    mask_reused = sample_span_masks(input_ids[:, :R], goal=params.num_predict_reused,
                                    span_tag=hashrand.TAG_SPANS_REUSED,
                                    topup_tag=hashrand.TAG_TOPUP_REUSED, **kw)
    mask_new = sample_span_masks(input_ids[:, R:], goal=params.num_predict_new,
                                 span_tag=hashrand.TAG_SPANS_NEW,
                                 topup_tag=hashrand.TAG_TOPUP_NEW, **kw)
    is_masked = np.concatenate([mask_reused, mask_new], axis=1)
    # <sep>/<cls> may be sampled but are never targets (they keep their rank; see tasks/objective.py).
    is_func = (input_ids == special_ids.SEP_ID) | (input_ids == special_ids.CLS_ID)
    is_masked &= ~is_func
    rows, cols = np.nonzero(is_masked)               # row-major: each row's in ascending order
    per_row = np.bincount(rows, minlength=chunks.size)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    target_positions = np.full((chunks.size, params.num_predict), -1, dtype=np.int32)
    target_positions[rows, slot] = cols

    perm_rank = sample_ranks_batch(keys, L, params.perm_size)
    return {"input_ids": input_ids, "segment_ids": segment_ids,
            "target_positions": target_positions, "perm_rank": perm_rank,
            "is_next": split["is_next"].astype(np.int32),
            "chunk_index": chunks.astype(np.int32)}


def build_example(ids: np.ndarray, sent_ids: np.ndarray, chunk_index: int, *,
                  params: DataParams, starts_word: np.ndarray, stream_id: int,
                  direction: int, pass_id: int) -> Example:
    """Builds chunk `chunk_index` of a row (already reversed if direction == 1)."""
    b = build_examples(ids, sent_ids, np.array([chunk_index]), params=params,
                       starts_word=starts_word, stream_id=stream_id, direction=direction,
                       pass_id=pass_id)
    return Example(input_ids=b["input_ids"][0], segment_ids=b["segment_ids"][0],
                   target_positions=b["target_positions"][0], perm_rank=b["perm_rank"][0],
                   stream_id=stream_id, chunk_index=chunk_index, direction=direction,
                   pass_id=pass_id, is_next=int(b["is_next"][0]))


def row_example_batches(ids: np.ndarray, sent_ids: np.ndarray, *, params: DataParams,
                        starts_word: np.ndarray, stream_id: int, pass_id: int,
                        direction: int,
                        batch: int = CHUNK_BATCH) -> Iterator[Dict[str, np.ndarray]]:
    """Yields every chunk of one row in one direction as `build_examples` batches, in order."""
    if direction == 1:
        ids, sent_ids = ids[::-1], sent_ids[::-1]
    bounds = sentence_bounds(sent_ids)
    total = num_chunks(ids.shape[0], params)
    for first in range(0, total, batch):
        yield build_examples(ids, sent_ids, np.arange(first, min(first + batch, total)),
                             params=params, starts_word=starts_word, stream_id=stream_id,
                             direction=direction, pass_id=pass_id, bounds=bounds)
