"""Stream ownership: how the tokenized documents are laid out into parallel streams.

The documents are put in a pseudorandom order fixed by `--seed` (a hash of the seed and the
document's key, so it does not depend on how the work was split), concatenated into one token
stream, and cut into `num_streams` rows of equal length T = total // num_streams (the tail is
dropped), as Transformer-XL batches a corpus. A document may straddle two rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Dict, Iterable, List, Tuple

import numpy as np

from xlnet_tf2.prep.examples import num_chunks
from xlnet_tf2.data.params import DataParams, DataPrepError

DocKey = Tuple[int, int]
# (stream id, offset in the stream, begin in the document, end in the document)
Piece = Tuple[int, int, int, int]


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


def compute_layout(lengths: Iterable[Tuple[DocKey, int]],
                   params: DataParams) -> Tuple[StreamLayout, Dict[DocKey, List[Piece]]]:
    """Places every document in the streams.

    Args:
      lengths: (document key, number of tokens) pairs, in any order.
      params: the data parameters (seed, num_streams, seq_len, reuse_len).

    Returns:
      (layout summary, {document key: pieces}). Raises DataPrepError if the corpus is too
      small for one example per stream.
    """
    ordered = sorted(lengths, key=lambda kv: document_order_key(params.seed, kv[0]))
    total = int(sum(n for _, n in ordered))
    row_len = total // params.num_streams
    chunks = num_chunks(row_len, params)
    if chunks < 1:
        need = params.num_streams * params.seq_len
        raise DataPrepError(
            f"Too little text: the inputs give {total} tokens in {len(ordered)} documents, but "
            f"--num_streams={params.num_streams} streams of one --seq_len={params.seq_len} "
            f"example each need at least {need}. Add text or lower --num_streams.")
    used = row_len * params.num_streams
    placement: Dict[DocKey, List[Piece]] = {}
    offset = 0
    for key, n in ordered:
        begin = 0
        while begin < n and offset + begin < used:
            position = offset + begin
            stream, in_stream = divmod(position, row_len)
            take = min(n - begin, row_len - in_stream)
            placement.setdefault(key, []).append((stream, in_stream, begin, begin + take))
            begin += take
        offset += n
    layout = StreamLayout(total_tokens=total, documents=len(ordered), row_len=row_len,
                          chunks_per_row=chunks)
    return layout, placement


def assemble_row(pieces: Iterable[Tuple[int, np.ndarray, np.ndarray]],
                 row_len: int) -> Tuple[np.ndarray, np.ndarray]:
    """Joins one stream's pieces (offset, ids, sentence ids) into int32 [T] ids and sentence ids.

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
