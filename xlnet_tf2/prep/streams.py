"""Stream ownership: how the tokenized documents are laid out into parallel streams.

The documents are put in a pseudorandom order fixed by `--seed` (a hash of the seed and the
document's key, so it does not depend on how the work was split), concatenated into one token
stream, and cut into `num_streams` rows of equal length stream_len = total // num_streams (the
tail is dropped), as Transformer-XL batches a corpus. A document may straddle two rows. The
words stream, chunk and pass: docs/GLOSSARY.md#data-schedule-words.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Dict, Iterable, Sequence, Tuple

import numpy as np

from xlnet_tf2.prep.examples import num_chunks
from xlnet_tf2.data.params import DataParams, DataPrepError

DocKey = Tuple[int, int]


@dataclasses.dataclass(frozen=True)
class StreamLayout:
    total_tokens: int
    documents: int
    row_len: int
    chunks_per_row: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def document_order_key(seed: int, key: DocKey) -> bytes:
    return hashlib.sha256(f"{seed}:{key[0]}:{key[1]}".encode()).digest()


def compute_layout(doc_keys: Sequence[DocKey], part_doc, part_number, part_len,
                   params: DataParams) -> Tuple[StreamLayout, Dict[str, np.ndarray]]:
    """Places every document in the streams, vectorized over the parts of the documents.

    Names: num_docs documents, num_parts parts (a long document is tokenized in several
    parts), num_pieces pieces (a part cut at the row ends: a part lies in one row or straddles
    a few).

    Args:
      doc_keys: the num_docs document keys.
      part_doc: int [num_parts] document of each part (an index into doc_keys).
      part_number: int [num_parts] place of the part in its document (parts join in this order).
      part_len: int [num_parts] tokens of each part.
      params: the data parameters (seed, num_streams, seq_len, reuse_len).

    A document of at most one token (only the <eod> of parts that encoded to nothing) is left
    out. Raises DataPrepError if the corpus is too small for one example per stream.

    Returns:
      (layout summary, pieces): pieces maps "part" (index into the num_parts parts), "stream",
      "offset" (in the stream), "begin" and "end" (in the part) to int64 [num_pieces] arrays, in
      stream order and, inside a stream, by offset.
    """
    part_doc = np.asarray(part_doc, np.int64)
    part_len = np.asarray(part_len, np.int64)
    num_docs = len(doc_keys)
    doc_len = np.bincount(part_doc, weights=part_len, minlength=num_docs).astype(np.int64)
    kept = np.flatnonzero(doc_len > 1).tolist()
    order = np.array(sorted(kept, key=lambda d: document_order_key(params.seed, doc_keys[d])),
                     np.int64)
    total = int(doc_len[order].sum())
    row_len = total // params.num_streams
    chunks = num_chunks(row_len, params)
    if chunks < 1:
        need = params.num_streams * params.seq_len
        raise DataPrepError(
            f"Too little text: the inputs give {total} tokens in {len(order)} documents, but "
            f"--num_streams={params.num_streams} streams of one --seq_len={params.seq_len} "
            f"example each need at least {need}. Add text or lower --num_streams.")
    used = row_len * params.num_streams
    doc_offset = np.full(num_docs, -1, np.int64)        # -1: left out
    doc_offset[order] = np.cumsum(doc_len[order]) - doc_len[order]
    # Where each part begins in its document: exclusive sums over the document's parts.
    by_doc = np.lexsort((np.asarray(part_number, np.int64), part_doc))
    sorted_len = part_len[by_doc]
    before = np.cumsum(sorted_len) - sorted_len
    sorted_doc = part_doc[by_doc]
    first = np.ones(by_doc.shape[0], bool)
    first[1:] = sorted_doc[1:] != sorted_doc[:-1]
    first_of_doc = np.maximum.accumulate(np.where(first, np.arange(by_doc.shape[0]), 0))
    part_begin = np.empty_like(part_len)
    part_begin[by_doc] = before - before[first_of_doc]
    # The parts' places in the concatenation of all streams, cut to `used` and at row ends.
    start = doc_offset[part_doc] + part_begin                                     # [num_parts]
    placed = np.flatnonzero((doc_offset[part_doc] >= 0) & (part_len > 0) & (start < used))
    start = start[placed]
    stop = np.minimum(start + part_len[placed], used)
    first_row, last_row = start // row_len, (stop - 1) // row_len
    count = last_row - first_row + 1
    part = np.repeat(placed, count)                                              # [num_pieces]
    within = np.arange(part.shape[0]) - np.repeat(np.cumsum(count) - count, count)
    row = np.repeat(first_row, count) + within
    part_start = np.repeat(start, count)
    begin = np.maximum(part_start, row * row_len)
    end = np.minimum(np.repeat(stop, count), (row + 1) * row_len)
    in_order = np.argsort(begin, kind="stable")   # begins are distinct: stream, then offset
    pieces = {"part": part, "stream": row, "offset": begin - row * row_len,
              "begin": begin - part_start, "end": end - part_start}
    layout = StreamLayout(total_tokens=total, documents=len(order), row_len=row_len,
                          chunks_per_row=chunks)
    return layout, {name: values[in_order] for name, values in pieces.items()}


def assemble_row(pieces: Iterable[Tuple[int, np.ndarray, np.ndarray]],
                 row_len: int) -> Tuple[np.ndarray, np.ndarray]:
    """Joins one stream's pieces (offset, ids, sentence ids) into int32 [stream_len] ids and
    sentence ids.

    Sentence ids are renumbered so different pieces (different documents) never share one.
    """
    ids = np.zeros(row_len, dtype=np.int32)
    sent = np.zeros(row_len, dtype=np.int64)
    filled = 0
    next_sentence = 0
    for offset, piece_ids, piece_sent in sorted(pieces, key=lambda p: p[0]):
        n = piece_ids.shape[0]
        ids[offset:offset + n] = piece_ids
        local = piece_sent - piece_sent[0]
        sent[offset:offset + n] = local + next_sentence
        next_sentence += int(local[-1]) + 1
        filled += n
    if filled != row_len:
        raise RuntimeError(f"stream assembled {filled} of {row_len} tokens")
    return ids, sent
