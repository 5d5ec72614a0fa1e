"""Span targets, A/B pairs and orders on real English text (standard-library docstrings)."""

import numpy as np
import pytest

from xlnet_tf2 import special_ids
from xlnet_tf2.data import hashrand
from xlnet_tf2.prep.examples import (build_example, build_examples, num_chunks,
                                     sentence_bounds, split_a_and_b)
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.objective_sampling import sample_span_mask, start_piece_table

from fixtures.corpora import corpus_path, tokenizer


@pytest.fixture(scope="module")
def encoded():
    tok = tokenizer()
    ids, sent = [], []
    with open(corpus_path()) as f:
        for number, line in enumerate(f):
            line_ids = tok.encode_ids(line) if line.strip() else [special_ids.EOD_ID]
            ids.extend(line_ids)
            sent.extend([number] * len(line_ids))
    return np.array(ids, np.int32), np.array(sent, np.int64), start_piece_table(tok)


def _runs(mask):
    """(begin, end) of every maximal run of True."""
    padded = np.concatenate([[False], mask, [False]]).astype(int)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2]))


@pytest.mark.parametrize("mode", ["word", "original"])
def test_exact_target_count(encoded, mode):
    ids, _, starts = encoded
    for k in range(200):
        half = ids[k * 256:(k + 1) * 256]
        mask = sample_span_mask(half, starts, 43, k, span_mode=mode, reverse=k % 2 == 1)
        assert mask.sum() == 43


def test_original_mode_spans_are_pieces(encoded):
    ids, _, starts = encoded
    lengths = []
    for k in range(200):
        half = ids[k * 512:(k + 1) * 512]
        mask = sample_span_mask(half, starts, 512, 1000 + k, span_mode="original",
                                top_up=False)
        for b, e in _runs(mask):
            assert starts[half[b]], "a span starts on a word-start piece"
            assert e - b <= 5
            lengths.append(e - b)
    # p(n) ~ 1/n over 1..5: the mean span is 5 / H_5 = 2.19 pieces.
    assert abs(np.mean(lengths) - 5 / sum(1 / n for n in range(1, 6))) < 0.15


def test_word_mode_spans_are_whole_words(encoded):
    ids, _, starts = encoded
    words = []
    for k in range(200):
        half = ids[k * 512:(k + 1) * 512]
        mask = sample_span_mask(half, starts, 512, 2000 + k, span_mode="word", top_up=False)
        for b, e in _runs(mask):
            assert starts[half[b]]
            assert e == len(half) or starts[half[e]], "a span ends at a word boundary"
            n_words = int(starts[half[b:e]].sum())
            assert 1 <= n_words <= 5
            words.append(n_words)
    assert abs(np.mean(words) - 5 / sum(1 / n for n in range(1, 6))) < 0.15


@pytest.mark.parametrize("alpha", [6, 12])
def test_spans_cover_one_in_k(encoded, alpha):
    # Without top-up the spans alone cover a bit less than 1/K = beta/alpha of the text: a
    # span of n pieces uses a window of n * alpha, plus the pieces skipped to reach a word
    # start. The top-up (on in data preparation) then brings every example to exactly P.
    ids, _, starts = encoded
    covered = total = 0
    for k in range(300):
        half = ids[k * 512:(k + 1) * 512]
        mask = sample_span_mask(half, starts, 512, 3000 + k, alpha=alpha,
                                span_mode="original", top_up=False)
        covered += mask.sum()
        total += len(half)
    assert 0.75 / alpha < covered / total < 1 / alpha


def test_split_a_and_b_lengths_and_labels(encoded):
    ids, sent, _ = encoded
    begins = 1000 + 97 * np.arange(300)
    keys = hashrand.example_keys(0, 0, 0, 0, np.arange(300))
    split = split_a_and_b(sentence_bounds(sent), len(ids), begins, 253, keys)
    labels = []
    for k, begin in enumerate(begins):
        a_len, b_begin, b_len = split["a_len"][k], split["b_begin"][k], split["b_len"][k]
        assert a_len + b_len == 253 and a_len >= 1 and b_len >= 1
        b = ids[b_begin:b_begin + b_len]
        if split["is_next"][k]:
            # B starts at the sentence boundary where A was cut (A may then lose its right
            # end to fit the total, as in the original).
            assert sent[b_begin] != sent[b_begin - 1] and begin + a_len <= b_begin < begin + 254
        else:
            assert b_begin == 0 or sent[b_begin] != sent[b_begin - 1], "B starts a sentence"
        assert len(b) == b_len
        labels.append(split["is_next"][k])
    assert 0.4 < np.mean(labels) < 0.6


def test_split_a_and_b_matches_the_original_loops(encoded):
    """The closed form equals the original's token-by-token loops on the same draws."""
    ids, sent, _ = encoded
    bounds, length, total = sentence_bounds(sent), len(ids), 253
    begins = 500 + 131 * np.arange(400)
    keys = hashrand.example_keys(3, 1, 0, 2, np.arange(400))
    split = split_a_and_b(bounds, length, begins, total, keys)
    u = hashrand.uniform(keys, hashrand.TAG_AB, np.arange(3))
    for k, begin in enumerate(begins):
        end, cut_points = begin + 1, []
        while end < length:
            if sent[end] != sent[end - 1]:
                if end - begin >= total:
                    break
                cut_points.append(end)
            end += 1
        if not cut_points or u[k, 0] < 0.5:
            label = 0
            a_end = end if not cut_points else cut_points[int(u[k, 1] * len(cut_points))]
            b_len = max(1, total - (a_end - begin))
            b_begin = int(u[k, 2] * (length - b_len))
            b_end = b_begin + b_len
            while b_begin > 0 and sent[b_begin - 1] == sent[b_begin]:
                b_begin -= 1
            while b_end < length - 1 and sent[b_end - 1] == sent[b_end]:
                b_end += 1
        else:
            label = 1
            a_end = cut_points[int(u[k, 1] * len(cut_points))]
            b_begin, b_end = a_end, end
        while a_end - begin + b_end - b_begin > total:
            if a_end - begin > b_end - b_begin:
                a_end -= 1
            else:
                b_end -= 1
        assert (split["is_next"][k], split["a_len"][k], split["b_begin"][k],
                split["b_len"][k]) == (label, a_end - begin, b_begin, b_end - b_begin), k


def test_built_examples_layout_targets_and_ranks(encoded):
    ids, sent, starts = encoded
    params = DataParams(seq_len=512, reuse_len=256, num_predict=85, perm_size=256)
    row, row_sent = ids[:20000], sent[:20000]
    assert num_chunks(len(row), params) == (20000 - 512) // 256 + 1
    for chunk in range(0, 60, 3):
        ex = build_example(row, row_sent, chunk, params=params, starts_word=starts,
                           stream_id=0, direction=0, pass_id=0)
        np.testing.assert_array_equal(ex.input_ids[:256], row[chunk * 256:chunk * 256 + 256])
        seps = np.flatnonzero(ex.input_ids == special_ids.SEP_ID)
        assert ex.input_ids[-1] == special_ids.CLS_ID and seps[-1] == 510
        seg = ex.segment_ids
        assert seg[-1] == 2 and set(seg[:seps[0] + 1]) == {0} and set(seg[seps[0] + 1:511]) == {1}
        positions = ex.target_positions[ex.target_positions >= 0]
        assert np.all(np.diff(positions) > 0)
        assert (positions < 256).sum() == 43, "reused half: exactly ceil(85 / 2) targets"
        # New half: 42 sampled, minus any <sep>/<cls> that were sampled (at most 3).
        assert 39 <= (positions >= 256).sum() <= 42
        assert not np.isin(ex.input_ids[positions], [special_ids.SEP_ID, special_ids.CLS_ID]).any()
        assert sorted(ex.perm_rank[:256]) == list(range(256))
        assert sorted(ex.perm_rank[256:]) == list(range(256, 512))


def test_examples_are_seeded_by_identity(encoded):
    ids, sent, starts = encoded
    params = DataParams(seq_len=128, reuse_len=64, num_predict=21, perm_size=64, seed=5)
    kw = dict(params=params, starts_word=starts, stream_id=3, direction=0, pass_id=1)
    a = build_example(ids[:5000], sent[:5000], 4, **kw)
    b = build_example(ids[:5000], sent[:5000], 4, **kw)
    c = build_example(ids[:5000], sent[:5000], 4, **dict(kw, pass_id=0))
    np.testing.assert_array_equal(a.perm_rank, b.perm_rank)
    np.testing.assert_array_equal(a.target_positions, b.target_positions)
    assert not np.array_equal(a.perm_rank, c.perm_rank)
    # Built alone or in a batch of chunks: the same example.
    batch = build_examples(ids[:5000], sent[:5000], np.arange(2, 9), **kw)
    for name in ("input_ids", "segment_ids", "target_positions", "perm_rank"):
        np.testing.assert_array_equal(batch[name][2], getattr(a, name))
    assert batch["is_next"][2] == a.is_next
