"""The vectorized span sampler reproduces the original `_sample_mask` exactly.

`reference_sample_mask` below is the original algorithm (zihangdai/xlnet data_utils.py,
re-stated from its description, one span at a time with Python loops and the original's
piece test on the piece *strings*); it consumes the same counter-based draws as the
vectorized sampler: draw 2k is the k-th span length, draw 2k + 1 its left context, and
top-up draw j the j-th candidate position. It keeps the original's names: its `seg` (of
length `seg_len`) is the half being masked.
"""

import numpy as np
import pytest

from xlnet_tf2 import special_ids
from xlnet_tf2.data import hashrand
from xlnet_tf2.data.objective_sampling import (draw_span_length, is_start_piece,
                                          sample_span_masks, span_probabilities,
                                          start_piece_table)

from fixtures.corpora import corpus_path, tokenizer


def original_is_start_piece(piece):
    # The original's literal, as Python reads it: '!"#$%&\"()*+,-./:;?@[\\]^_`{|}~'.
    special = set(list('!"#$%&\"()*+,-./:;?@[\\]^_`{|}~'))
    return piece.startswith("\u2581") or piece.startswith("<") or piece in special


def reference_sample_mask(seg, pieces, goal, key, span_tag, topup_tag, *, reverse,
                          alpha=6, beta=1, max_span=5, word_mode=False):
    seg_len = len(seg)
    mask = np.zeros(seg_len, dtype=bool)
    if reverse:
        seg = seg[::-1]
    starts = lambda i: original_is_start_piece(pieces[seg[i]])  # noqa: E731
    cdf = span_probabilities(max_span)
    keys = np.array([key], np.uint64)
    draw = lambda tag, i: float(hashrand.uniform(keys, tag, i)[0])  # noqa: E731
    num_predict, cur_len, k = 0, 0, 0
    while cur_len < seg_len:
        if num_predict >= goal:
            break
        n = int(draw_span_length(np.array([draw(span_tag, 2 * k)]), cdf)[0])
        n = min(n, goal - num_predict)
        ctx_size = (n * alpha) // beta
        l_ctx = int(draw(span_tag, 2 * k + 1) * ctx_size)
        r_ctx = ctx_size - l_ctx
        k += 1
        beg = cur_len + l_ctx
        while beg < seg_len and not starts(beg):
            beg += 1
        if beg >= seg_len:
            break
        end, cnt = beg + 1, 1
        while end < seg_len:
            # The original tests the piece at `beg` here (its bug); "word" tests `end`.
            if starts(end if word_mode else beg):
                cnt += 1
                if cnt > n:
                    break
            end += 1
        if end >= seg_len:
            break
        if word_mode:
            end = min(end, beg + goal - num_predict)
        mask[beg:end] = True
        num_predict += end - beg
        cur_len = end + r_ctx
    j = 0
    while num_predict < goal:
        i = int(draw(topup_tag, j) * seg_len)
        j += 1
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return mask[::-1] if reverse else mask


@pytest.fixture(scope="module")
def corpus():
    tok = tokenizer()
    with open(corpus_path()) as f:
        ids = np.array([i for line in f.readlines()[:3000] for i in tok.encode_ids(line)],
                       np.int32)
    pieces = [tok.id_to_piece(i) for i in range(tok.vocab_size)]
    return ids, pieces, start_piece_table(tok)


def test_is_start_piece_is_the_originals():
    for piece in ["'", "=", ">"]:
        assert not is_start_piece(piece) and not original_is_start_piece(piece)
    for piece in ['"', "<", "<eod>", ",", ".", "(", "\u2581the", "\u2581'", "~"]:
        assert is_start_piece(piece) and original_is_start_piece(piece)
    for piece in ["the", "''", "=>", "s"]:
        assert not is_start_piece(piece)
    ascii_pieces = [chr(c) for c in range(33, 127)]
    assert [is_start_piece(p) for p in ascii_pieces] == \
        [original_is_start_piece(p) for p in ascii_pieces]


def test_start_piece_table_on_quote_equals_greater(tmp_path):
    # A vocabulary that holds the pieces ', = and > themselves (not only inside words).
    import sentencepiece as spm

    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece
    text = tmp_path / "t.txt"
    lines = [f"x{i} = y{i} > z ' q" for i in range(300)] + [f"line {i} of prose." for i in
                                                             range(300)]
    text.write_text("\n".join(lines) + "\n")
    prefix = train_sentencepiece([str(text)], vocab_size=40, model_prefix=str(tmp_path / "s"))
    tok = SentencePieceTokenizer.from_file(prefix)
    table = start_piece_table(tok)
    sp = spm.SentencePieceProcessor(model_file=prefix)
    for piece in ["'", "=", ">"]:
        piece_id = sp.PieceToId(piece)
        assert sp.IdToPiece(piece_id) == piece, f"{piece!r} is a piece of this vocabulary"
        assert not table[piece_id]
    assert table[sp.PieceToId(".")] and table[special_ids.EOD_ID]


@pytest.mark.parametrize("word_mode", [False, True])
def test_vectorized_sampler_equals_reference(corpus, word_mode):
    ids, pieces, starts = corpus
    for length, goal in [(256, 43), (256, 42), (64, 10), (512, 85), (40, 35)]:
        num = 60
        halves = np.stack([ids[k * 97:k * 97 + length] for k in range(num)])
        keys = hashrand.example_keys(11, 0, 0, length, np.arange(num))
        reverse = np.arange(num) % 2 == 1
        got = sample_span_masks(halves, starts, goal, keys, span_tag=hashrand.TAG_SPANS_NEW,
                                topup_tag=hashrand.TAG_TOPUP_NEW,
                                span_mode="word" if word_mode else "original",
                                reverse=reverse)
        for k in range(num):
            want = reference_sample_mask(halves[k], pieces, goal, int(keys[k]),
                                         hashrand.TAG_SPANS_NEW, hashrand.TAG_TOPUP_NEW,
                                         reverse=bool(reverse[k]), word_mode=word_mode)
            np.testing.assert_array_equal(got[k], want, err_msg=f"L={length} row {k}")
            assert got[k].sum() == goal


def _span_stats(ids, starts, mode, num=400, length=256, goal=43):
    halves = np.stack([ids[k * 211:k * 211 + length] for k in range(num)])
    keys = hashrand.example_keys(0, 0, 0, 0, np.arange(num))
    masks = sample_span_masks(halves, starts, goal, keys, span_tag=hashrand.TAG_SPANS_REUSED,
                              topup_tag=hashrand.TAG_TOPUP_REUSED, span_mode=mode,
                              top_up=False)
    padded = np.pad(masks.astype(np.int8), ((0, 0), (1, 1)))
    edges = np.diff(padded, axis=1)
    spans = (edges == 1).sum()
    return masks.sum() / num, spans / num, masks.sum() / spans


def test_span_statistics_of_both_modes(corpus):
    ids, _, starts = corpus
    pieces, spans, mean = _span_stats(ids, starts, "original")
    # Pieces: mean span 5 / H_5 = 2.19 pieces without the goal cap; the cap cuts some.
    assert 1.7 < mean < 2.3 and 15 < spans < 26
    pieces_w, spans_w, mean_w = _span_stats(ids, starts, "word")
    assert mean_w > mean + 0.3, "whole-word spans are longer in pieces"
    assert spans_w < spans
