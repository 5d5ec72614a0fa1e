"""Batch encoding equals line-by-line `encode_ids`; cost is linear whatever the line lengths."""

import time

import numpy as np
import pytest

from xlnet_tf2.prep.encode import BatchEncoder, CachePolicy, normalize, score_margin
from xlnet_tf2.prep.examples import row_example_batches
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data import records
from xlnet_tf2.data.objective_sampling import start_piece_table
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, preprocess_text

from fixtures.corpora import corpus_path, tokenizer

HARD = ["In 2000, 1,234,567 people paid $3,50, or 12,", "Café naïve résumé – “quoted” ``x'' ''y''",
        "a\u00a0b\u2003c  d\te", "zero\u200bwidth and ¨ diaeresis a¨b",
        "漢字 unknown ☃ chars<eop> x <eop>y", "", "   ", "2000,", ",,,", "ﬁne ligature ½ ㍱",
        "ÀÉÎÕÜ ñ ç", "tab\tseparated\tvalues 3,4,5,"]


def _split(ids, per_line):
    offsets = np.concatenate([[0], np.cumsum(per_line)])
    return [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(per_line))]


def test_normalize_equals_preprocess_text():
    with open(corpus_path()) as f:
        lines = f.readlines()[:2000]
    for line in lines + HARD:
        for lower in (False, True):
            assert normalize(line, lower=lower, keep_accents=False) == \
                preprocess_text(line, lower=lower)


SPACED = ["  two  spaces  inside  ", " lead", "trail ", "a    b", "``x`` and ''y''  z", " "]


def test_exact_mode_equals_encode_ids():
    tok = tokenizer()
    with open(corpus_path()) as f:
        text = f.read()
    # Lines with their "\n" (normalized in Python) and without (printable ASCII lines go to
    # SentencePiece as they are: its own rules strip and collapse the spaces).
    lines = text.splitlines(keepends=True)[:1000] + text.split("\n") + HARD + SPACED
    encoder = BatchEncoder(tok)
    assert encoder._ascii_as_is
    ids, per_line = encoder.encode_lines(lines)
    assert ids.dtype == np.int32 and per_line.shape == (len(lines),)
    assert _split(ids, per_line) == [tok.encode_ids(line) for line in lines]
    lower = SentencePieceTokenizer(tok.model_proto, lower=True)
    assert _split(*BatchEncoder(lower).encode_lines(lines[1000:2000] + HARD + SPACED)) == \
        [lower.encode_ids(line) for line in lines[1000:2000] + HARD + SPACED]


# "x___" splits in two ways of exactly the same score with the test model ("_" + "__" or
# "__" + "_" after "x"); "]]]" does with 8k models trained on docstrings.
TIES = ["x___ a___ x___ _____", "]]] ]]]] a]]]b ]]]", "((( ))) (((x)))", "---- ----- ======", "x" * 1200,
        "word " * 300, "tab\tand control\x01char", "MiXeD CaSe ``quotes'' " + "'" * 3 + "x"]


def test_word_cache_equals_encode_ids():
    """Exact: new, second-time and cached words, batch by batch, ties and odd lines too."""
    tok = tokenizer()
    encoder = BatchEncoder(tok, word_cache=True, adaptive=False)
    with open(corpus_path()) as f:
        lines = f.readlines()[:3000]
    want = [tok.encode_ids(line) for line in lines]
    want_extra = [tok.encode_ids(line) for line in HARD + TIES]
    for _ in range(3):  # words are new, then seen twice (cached or refused), then cached
        got = []
        for start in range(0, len(lines), 500):
            got += _split(*encoder.encode_lines(lines[start:start + 500]))
        assert got == want
        assert _split(*encoder.encode_lines(HARD + TIES)) == want_extra
    assert encoder._rows > 1000  # the cache is really used
    # A word with two segmentations of the same score never comes from the cache.
    top2 = encoder._sp.NBestEncodeAsImmutableProto("x___", 2).nbests
    assert top2[0].score == top2[1].score
    assert encoder._index["x___"] < 0 and encoder._index["x"] >= 0
    # Uncased models lowercase first; the cached path must too.
    lower = SentencePieceTokenizer(tok.model_proto, lower=True)
    enc = BatchEncoder(lower, word_cache=True, adaptive=False)
    for _ in range(3):
        assert _split(*enc.encode_lines(lines[:300] + TIES)) == \
            [lower.encode_ids(line) for line in lines[:300] + TIES]


def _encode_in_batches(encoder, lines, size):
    got = []
    for start in range(0, len(lines), size):
        got += _split(*encoder.encode_lines(lines[start:start + size]))
    return got


def test_default_uses_the_cache_on_repetitive_text_and_line_mode_on_new_text():
    """The default encoder decides batch by batch from counts; its ids are exact either way."""
    tok = tokenizer()
    with open(corpus_path()) as f:
        lines = f.read().split("\n")
    # New text: every line once. The cache is tried on the first batch (and given a second
    # one while its lookups pay), then left off: learning every new word costs more than the
    # few lines it could assemble save.
    novel = BatchEncoder(tok, word_cache=True)
    assert _encode_in_batches(novel, lines, 200) == [tok.encode_ids(line) for line in lines]
    assert novel.counts["batches"] >= 12 and 1 <= novel.counts["cache_batches"] <= 2
    # Repetitive text: 40 lines over and over. The first two batches are trials (the cache
    # on their first quarter, where the 40 lines come back: the learning pays on the second);
    # every later batch uses the cache whole and takes 90% of its tokens from it.
    repetitive = [line for line in lines if line.strip()][:40] * 240
    cached = BatchEncoder(tok, word_cache=True)
    want = [tok.encode_ids(line) for line in repetitive]
    assert _encode_in_batches(cached, repetitive, 800) == want
    assert cached.counts["cache_batches"] == cached.counts["batches"] == 12
    assert cached.counts["cached_tokens"] > (0.9 * 10 / 12) * cached.counts["tokens"]
    # Line mode on the same text: same ids, no cache.
    line_mode = BatchEncoder(tok)
    assert _encode_in_batches(line_mode, repetitive, 800) == want
    assert line_mode.counts["cache_batches"] == 0


def test_cache_policy_books_savings_against_costs():
    """Units: one token's line-mode work. Hand-computed balances of CachePolicy."""
    policy = CachePolicy()
    assert policy.use_cache()  # a worker starts by trying the cache
    # Saves 0.6 * 1000 = 600 against 0.3 * 700 words = 210: pays, stays on.
    policy.record(1000, words=700, cached_tokens=1000, with_cache=True)
    assert policy.use_cache() and policy.balance == pytest.approx(600 - 210)
    # Lookups pay (600 > 210) but learning does not (0.6 * 700 + 13 * 100 more): a second
    # chance, once.
    policy.record(1000, words=700, new_words=700, checked_words=100, cached_tokens=1000,
                  with_cache=True)
    assert policy.use_cache()
    assert policy.balance == pytest.approx(390 + 600 - 210 - 420 - 1300)
    policy.record(1000, words=700, new_words=700, checked_words=100, cached_tokens=1000,
                  with_cache=True)
    balance = 390 + 2 * (600 - 210 - 420 - 1300)
    assert policy.balance == pytest.approx(balance) and policy.tokens == 3000
    # Off: line-mode batches until the balance is within ALLOWANCE of all tokens encoded.
    off = 0
    while not policy.use_cache():
        policy.record(10_000)
        off += 1
    assert off == int(np.ceil((-balance / CachePolicy.ALLOWANCE - 3000) / 10_000))
    # A batch whose lookups alone cost more than they save turns it off at once.
    policy.record(1000, words=3000, cached_tokens=1000, with_cache=True)
    assert not policy.use_cache()


def test_score_margin_covers_float32_rounding():
    # Scores up to 20 on lines of 1,000 characters: running sums below 2^15, ulp 2^-9.
    assert score_margin(20.0) == 2.0 * 2.0 ** (14 - 23)
    assert score_margin(1000.0) > score_margin(20.0)


def _prepare_without_beam(lines, tok, params):
    """Tokenize + build + serialize every example of one row, as a Beam worker does."""
    ids, per_line = BatchEncoder(tok).encode_lines(lines)
    sent = np.repeat(np.arange(len(per_line)), per_line)
    starts = start_piece_table(tok)
    count = 0
    for direction in (0, 1):
        for batch in row_example_batches(ids, sent, params=params, starts_word=starts,
                                         stream_id=0, pass_id=0, direction=direction):
            num = batch["chunk_index"].shape[0]
            for name in ("stream_id", "direction", "pass_id"):
                batch[name] = np.zeros(num, np.int32)
            count += len(records.serialize_batch(batch))
    return ids.shape[0], count


def test_cost_is_linear_in_line_length():
    tok = tokenizer()
    with open(corpus_path()) as f:
        lines = [line for line in f.readlines() if line.strip()]
    params = DataParams(seq_len=128, reuse_len=64, num_predict=21, perm_size=64)
    cpu = {}
    for name, text in [("lines", lines), ("one line", [" ".join(l.strip() for l in lines)])]:
        start = time.process_time()  # this process's CPU: not what other processes take
        tokens, examples = _prepare_without_beam(text, tok, params)
        cpu[name] = time.process_time() - start
        assert examples == 2 * ((tokens - 128) // 64 + 1)
    # 250 kB as one line costs about what it costs as lines: twice, measured (0.18 s and
    # 0.09 s of CPU); the old per-token sentence walks in split_a_and_b, quadratic in the
    # line length, took minutes. The budget is 5 times the measured cost.
    assert cpu["one line"] < 5 * cpu["lines"] + 0.5, cpu
