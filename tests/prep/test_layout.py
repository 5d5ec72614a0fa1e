"""The layout step (beam_pipeline._layout over streams.compute_layout): every document's parts
placed in the streams, checked against a direct per-document reference on random corpora."""

import hashlib

import numpy as np
import pytest

from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.prep.beam_pipeline import _layout


def reference_layout(batches, params):
    """Documents in sha256(seed:file:number) order, concatenated, cut into num_streams rows;
    each document's parts (in part-number order) cut where the document is cut."""
    parts = {}
    for _, path, docs in batches:
        start = 0
        for (doc_key, number, _), n in docs:
            parts.setdefault(doc_key, []).append((number, path, start, n))
            start += n
    lengths = {key: sum(p[3] for p in found) for key, found in parts.items()}
    docs = sorted((k for k, n in lengths.items() if n > 1),
                  key=lambda k: hashlib.sha256(f"{params.seed}:{k[0]}:{k[1]}".encode()).digest())
    total = sum(lengths[k] for k in docs)
    row_len = total // params.num_streams
    per_stream = {s: [] for s in range(params.num_streams)}
    position = 0
    for key in docs:
        for _, path, start, n in sorted(parts[key]):
            piece = None                 # token by token: slow and plainly right
            for t in range(n):
                stream, offset = divmod(position + t, row_len)
                if stream >= params.num_streams:
                    break
                if piece is None or offset == 0:   # a part's piece ends at its row's end
                    piece = [offset, path, start + t, start + t]
                    per_stream[stream].append(piece)
                piece[3] += 1
            position += n
    per_stream = {s: [tuple(p) for p in pieces] for s, pieces in per_stream.items()}
    return total, len(docs), row_len, per_stream


def random_batches(rng, num_docs, max_parts):
    """Batches of document parts: some documents in several parts spread over batches (out
    of order), some of a single token (only <eod>: left out)."""
    parts = []
    for d in range(num_docs):
        key = (int(rng.randint(3)), d * 7 + 1)
        num = int(rng.randint(1, max_parts + 1))
        for number in range(num):
            n = 1 if rng.rand() < 0.05 and num == 1 else int(rng.randint(1, 300))
            parts.append(((key, number, number == num - 1), n))
    order = rng.permutation(len(parts))
    batches, size = [], int(rng.randint(3, 20))
    for b, lo in enumerate(range(0, len(parts), size)):
        docs = [parts[i] for i in order[lo:lo + size]]
        batches.append(((0, 0, b, 0), f"tokens/batch-{b}.npy", docs))
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_layout_matches_the_per_document_reference(seed):
    rng = np.random.RandomState(seed)
    params = DataParams(seq_len=32, reuse_len=16, num_predict=5, perm_size=16,
                        num_streams=int(rng.choice([1, 2, 3, 5, 8])), seed=seed)
    batches = random_batches(rng, num_docs=int(rng.randint(20, 120)), max_parts=3)
    summary, rows = _layout(batches, params, "train")
    streams = dict(rows)
    total, documents, row_len, expected = reference_layout(batches, params)
    assert summary == dict(total_tokens=total, documents=documents, row_len=row_len,
                           chunks_per_row=(row_len - 32) // 16 + 1)
    assert [stream for stream, _ in rows] == list(range(params.num_streams))
    assert streams == expected
    for pieces in streams.values():
        assert sum(end - begin for _, _, begin, end in pieces) == row_len


def test_too_little_text_is_one_clear_line():
    batches = [((0, 0, 0, 0), "tokens/b.npy", [(((0, 1), 0, True), 40)])]
    with pytest.raises(DataPrepError, match="Too little text: the inputs give 40 tokens in 1 "
                                            "documents.*--num_streams=2"):
        _layout(batches, DataParams(seq_len=32, reuse_len=16, num_predict=5, perm_size=16,
                                    num_streams=2), "train")
