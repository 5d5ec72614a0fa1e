"""Generation: greedy tokens and per-step logits, beam search (tokens and scores), the
repetition penalty and stop-id lists equal HuggingFace's XLNetLMHeadModel.generate on the same
weights (eos handling included); the memory cache gives exactly the tokens of a full
recomputation; left-padded batches equal rows alone; sampling filters (hand-worked), seeded
sampling and several sequences per prompt; streaming; no retracing across prompt lengths; XLA;
the text helper with the padding text."""

import logging

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from xlnet_tf2.models import generation

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import ours_from_hf, random_hf_model  # noqa: E402

V, P, N = 97, 7, 16


def _config(**overrides):
    values = dict(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64, n_token=V,
                  dropout=0.0, dropatt=0.0)
    values.update(overrides)
    return xlnet_tf2.XLNetConfig.from_dict(values)


def _models(config, seed=0):
    """A random HF model whose greedy continuations vary (a larger embedding, no LM bias:
    with the plain random weights every row repeats one token) and ours with its weights."""
    hf = random_hf_model(config, seed)
    with torch.no_grad():
        hf.lm_loss.bias.zero_()
        hf.transformer.word_embedding.weight.mul_(10.0)
    return hf, ours_from_hf(hf, config)


@pytest.fixture(scope="module")
def models():
    return _models(_config())


def _prompts(batch=3, length=P, seed=0):
    return np.random.default_rng(seed).integers(9, V, size=(batch, length)).astype(np.int32)


def _hf_generate(hf, ids, **kwargs):
    with torch.no_grad():
        out = hf.generate(torch.tensor(ids).long(), do_sample=False, output_scores=True,
                          return_dict_in_generate=True, **kwargs)
    return out.sequences.numpy(), torch.stack(out.scores, 1).numpy()


def test_greedy_equals_huggingface(models):
    hf, ours = models
    ids = _prompts()
    theirs, their_scores = _hf_generate(hf, ids, max_new_tokens=N, eos_token_id=None)
    got = ours.generate(ids, max_new_tokens=N, eos_token_id=None, output_scores=True)
    np.testing.assert_array_equal(got.sequences, theirs)
    np.testing.assert_allclose(got.scores, their_scores, atol=1e-4)
    assert len({tuple(row) for row in got.sequences[:, P:].tolist()}) == 3  # not degenerate
    assert min(len(set(row)) for row in got.sequences[:, P:].tolist()) >= 3


def test_end_of_sequence_like_huggingface(models):
    hf, ours = models
    ids = _prompts(seed=1)
    free = ours.generate(ids, max_new_tokens=N, eos_token_id=None)[:, P:]
    eos = int(free[0, 3])  # row 0 emits it at step 3 (or earlier)
    outputs = []
    for batch in (ids, ids[:1]):  # alone, row 0 finishes and the output stops early
        theirs, _ = _hf_generate(hf, batch, max_new_tokens=N, eos_token_id=eos, pad_token_id=5)
        got = ours.generate(batch, max_new_tokens=N, eos_token_id=eos, pad_token_id=5)
        np.testing.assert_array_equal(got, theirs)
        outputs.append(got)
    first = list(free[0]).index(eos)
    assert outputs[1].shape == (1, P + first + 1) and outputs[1][0, -1] == eos
    if outputs[0].shape[1] > P + first + 1:  # the other rows went on: row 0 is padded
        assert (outputs[0][0, P + first + 1:] == 5).all()


def test_cache_equals_full_recomputation_with_padding_and_sampling():
    """Run-time settings of the loaded model (memory, reuse_len, dropout) do not matter:
    generation runs in inference mode on its own memory."""
    _, ours = _models(_config(mem_len=6, reuse_len=3, dropout=0.1, dropatt=0.1), seed=4)
    lengths = [7, 4, 1]
    rows = [_prompts(1, n, seed=10 + n)[0] for n in lengths]
    ids = np.full((3, 7), 5, np.int32)
    mask = np.zeros((3, 7), np.int32)
    for b, row in enumerate(rows):
        ids[b, 7 - len(row):], mask[b, 7 - len(row):] = row, 1
    for sampling in (dict(), dict(do_sample=True, top_k=8, top_p=0.9, temperature=0.7, seed=3)):
        cached = ours.generate(ids, attention_mask=mask, max_new_tokens=10, eos_token_id=None,
                               output_scores=True, **sampling)
        full = ours.generate(ids, attention_mask=mask, max_new_tokens=10, eos_token_id=None,
                             use_cache=False, output_scores=True, **sampling)
        np.testing.assert_array_equal(cached.sequences, full.sequences)
        np.testing.assert_allclose(cached.scores, full.scores, atol=1e-4)
    # each left-padded row continues as it does alone (greedy)
    greedy = ours.generate(ids, attention_mask=mask, max_new_tokens=10, eos_token_id=None)
    for b, row in enumerate(rows):
        alone = ours.generate(row[None], max_new_tokens=10, eos_token_id=None)
        np.testing.assert_array_equal(greedy[b, 7:], alone[0, len(row):])


def test_filter_logits_hand_worked():
    probs = np.array([[0.05, 0.5, 0.15, 0.3]])
    logits = tf.constant(np.log(probs), tf.float32)
    kept = lambda **kw: np.isfinite(generation.filter_logits(  # noqa: E731
        logits, generation.Sampling(do_sample=True, **kw)).numpy())[0].tolist()
    assert kept(top_k=2) == [False, True, False, True]
    assert kept(top_p=0.5) == [False, True, False, False]           # 0.5 reaches 0.5
    assert kept(top_p=0.7) == [False, True, False, True]            # 0.5 + 0.3
    assert kept(top_p=0.81) == [False, True, True, True]            # + 0.15
    assert kept(top_k=3, top_p=0.9) == [False, True, True, True]
    scaled = generation.filter_logits(logits, generation.Sampling(do_sample=True, temperature=2))
    np.testing.assert_allclose(scaled.numpy(), np.log(probs) / 2, rtol=1e-6)
    with pytest.raises(ValueError, match="top_p"):
        generation.Sampling(top_p=0.0)


def test_seeded_sampling_stays_in_the_filtered_set(models):
    _, ours = models
    ids = _prompts(batch=4, seed=2)
    common = dict(max_new_tokens=12, eos_token_id=None, output_scores=True)
    one = ours.generate(ids, do_sample=True, top_k=1, seed=5, **common)
    greedy = ours.generate(ids, **common)
    np.testing.assert_array_equal(one.sequences, greedy.sequences)
    first = ours.generate(ids, do_sample=True, top_k=5, seed=7, **common)
    again = ours.generate(ids, do_sample=True, top_k=5, seed=7, **common)
    other = ours.generate(ids, do_sample=True, top_k=5, seed=8, **common)
    np.testing.assert_array_equal(first.sequences, again.sequences)
    assert (first.sequences != other.sequences).any()
    assert (first.sequences != greedy.sequences).any()
    chosen = first.sequences[:, P:]
    rank = (first.scores > np.take_along_axis(first.scores, chosen[..., None], -1)).sum(-1)
    assert rank.max() < 5 and rank.max() > 0  # in the top 5, not always the top 1


@pytest.mark.xla
def test_jit_compile_gives_the_same_tokens(models):
    _, ours = models
    ids = _prompts(seed=3)
    eager_graph = ours.generate(ids, max_new_tokens=8, eos_token_id=None)
    compiled = ours.generate(ids, max_new_tokens=8, eos_token_id=None, jit_compile=True)
    np.testing.assert_array_equal(compiled, eager_graph)
    # a second call with the same shapes and settings reuses the trace
    traces = generation._compiled(ours, True).experimental_get_tracing_count()
    again = ours.generate(ids[::-1], max_new_tokens=8, eos_token_id=None, jit_compile=True)
    assert generation._compiled(ours, True).experimental_get_tracing_count() == traces
    np.testing.assert_array_equal(again, eager_graph[::-1])
    # beam search too (its loop gathers memory rows by beam every step)
    stops = [int(eager_graph[0, P + 3])]
    compiled = ours.generate(ids, max_new_tokens=8, eos_token_id=stops, num_beams=3,
                             jit_compile=True)
    np.testing.assert_array_equal(compiled, ours.generate(ids, max_new_tokens=8,
                                                          eos_token_id=stops, num_beams=3))


def test_text_helper_puts_the_padding_text_first(tmp_path, models):
    from fixtures.task_files import train_tiny_spm

    tokenizer = xlnet_tf2.XLNetTokenizer(train_tiny_spm(str(tmp_path)))
    _, ours = _models(_config(n_token=500), seed=6)
    prompt = "Return the value of"
    texts = generation.generate_text(ours, tokenizer, [prompt, "the header"], max_new_tokens=6,
                                     eos_token_id=None, padding_text="A short padding text.")
    # the same as the ids route: padding text, <eod>, prompt; the padding is not returned
    prefix = tokenizer.encode("A short padding text.", add_special_tokens=False) + [7]
    row = prefix + tokenizer.encode(prompt, add_special_tokens=False)
    ids = ours.generate(np.asarray([row]), max_new_tokens=6, eos_token_id=None)
    assert texts[0] == tokenizer.decode(ids[0, len(prefix):], skip_special_tokens=True)
    assert texts[0].startswith(prompt) and "padding" not in texts[0]
    tail = generation.generate_text(ours, tokenizer, prompt, max_new_tokens=6,
                                    eos_token_id=None, padding_text="A short padding text.",
                                    return_full_text=False)
    assert texts[0] == prompt + " " + tail[0] or texts[0] == prompt + tail[0]
    assert len(generation.DEFAULT_PADDING_TEXT.split()) > 100


def test_bad_prompts_are_clear_errors(models):
    _, ours = models
    with pytest.raises(ValueError, match="left padded"):
        ours.generate(np.ones((1, 3), np.int32), attention_mask=[[1, 1, 0]])
    with pytest.raises(ValueError, match="prompt_length > 0"):
        ours.generate(np.zeros((2, 0), np.int32))
    bi = xlnet_tf2.XLNetLMHeadModel(_config(bi_data=True))
    with pytest.raises(ValueError, match="bi_data off"):
        bi.generate(np.ones((2, 3), np.int32))


def _hf_beams(hf, ids, **kwargs):
    with torch.no_grad():
        out = hf.generate(torch.tensor(ids).long(), do_sample=False, output_scores=True,
                          return_dict_in_generate=True, pad_token_id=5, **kwargs)
    return out.sequences.numpy(), out.sequences_scores.numpy()


def test_beam_search_equals_huggingface(models):
    """HF's beam search (transformers 5) on the same weights: tokens and final scores, with
    and without stop ids, several returned sequences, repetition and length penalties and the
    three early-stopping rules."""
    hf, ours = models
    ids = _prompts(seed=0)
    greedy = ours.generate(ids, max_new_tokens=N, eos_token_id=None)
    stops = [int(greedy[0, P + 3]), int(greedy[1, P + 5])]  # rows 0 and 1 emit these
    cases = [dict(num_beams=4, num_return_sequences=2, repetition_penalty=1.5),
             dict(num_beams=3, length_penalty=0.5, early_stopping=True),
             dict(num_beams=2, length_penalty=2.0, early_stopping="never")]
    ended_early = differs_from_greedy = 0
    for kwargs in cases:
        for eos in (None, stops):
            theirs, their_scores = _hf_beams(hf, ids, max_new_tokens=N, eos_token_id=eos,
                                             **kwargs)
            got = ours.generate(ids, max_new_tokens=N, eos_token_id=eos, output_scores=True,
                                **kwargs)
            np.testing.assert_array_equal(got.sequences, theirs, err_msg=str((kwargs, eos)))
            np.testing.assert_allclose(got.sequences_scores, their_scores, atol=1e-5)
            ended_early += got.sequences.shape[1] < P + N
            if eos is None:  # the best beam of each prompt against greedy decoding
                best = got.sequences[::kwargs.get("num_return_sequences", 1)]
                differs_from_greedy += (best != greedy).any()
    assert ended_early >= 2 and differs_from_greedy >= 2   # the cases are not trivial


def test_repetition_penalty_and_stop_ids_equal_huggingface(models):
    hf, ours = models
    ids = _prompts(seed=4)
    plain = ours.generate(ids, max_new_tokens=N, eos_token_id=None)
    for penalty in (1.5, 0.7):
        theirs, their_scores = _hf_generate(hf, ids, max_new_tokens=N, eos_token_id=None,
                                            repetition_penalty=penalty)
        got = ours.generate(ids, max_new_tokens=N, eos_token_id=None, output_scores=True,
                            repetition_penalty=penalty)
        np.testing.assert_array_equal(got.sequences, theirs)
        np.testing.assert_allclose(got.scores, their_scores, atol=1e-4)  # penalized scores
        assert (got.sequences != plain).any()
    # a list of stop ids: each row stops at the first of them
    stops = [int(plain[0, P + 2]), int(plain[2, P + 6])]
    theirs, _ = _hf_generate(hf, ids, max_new_tokens=N, eos_token_id=stops, pad_token_id=5)
    np.testing.assert_array_equal(ours.generate(ids, max_new_tokens=N, eos_token_id=stops),
                                  theirs)


def test_num_return_sequences_and_errors(models):
    _, ours = models
    ids = _prompts(batch=2, seed=5)
    kwargs = dict(do_sample=True, top_k=20, max_new_tokens=8, eos_token_id=None, seed=1)
    out = ours.generate(ids, num_return_sequences=3, **kwargs)
    assert out.shape == (6, P + 8)
    np.testing.assert_array_equal(out[:, :P], np.repeat(ids, 3, axis=0))
    assert len({tuple(r) for r in out[:3, P:].tolist()}) > 1     # independent samples
    np.testing.assert_array_equal(out, ours.generate(ids, num_return_sequences=3, **kwargs))
    with pytest.raises(ValueError, match="Greedy decoding gives one sequence"):
        ours.generate(ids, num_return_sequences=2)
    with pytest.raises(ValueError, match="at most num_beams"):
        ours.generate(ids, num_beams=2, num_return_sequences=3)
    with pytest.raises(ValueError, match="Beam search with sampling"):
        ours.generate(ids, num_beams=2, do_sample=True)
    with pytest.raises(ValueError, match="vocabulary"):
        ours.generate(np.full((1, 3), V, np.int32))


def test_streamer_gets_every_token_as_it_comes(models):
    _, ours = models
    ids = _prompts(seed=6)
    free = ours.generate(ids, max_new_tokens=N, eos_token_id=None)
    stop = int(free[0, P + 4])
    seen = []
    out = ours.generate(ids, max_new_tokens=N, eos_token_id=stop, streamer=seen.append)
    np.testing.assert_array_equal(np.stack(seen, axis=1), out[:, P:])

    class Streamer:  # HF's protocol: the prompt first, then each step, then end()
        def __init__(self):
            self.calls = []

        def put(self, value):
            self.calls.append(np.array(value))

        def end(self):
            self.calls.append("end")

    streamer = Streamer()
    ours.generate(ids[:1], max_new_tokens=5, eos_token_id=None, streamer=streamer)
    np.testing.assert_array_equal(streamer.calls[0], ids[:1])
    assert [c.tolist() for c in streamer.calls[1:-1]] == [[t] for t in free[0, P:P + 5]]
    assert streamer.calls[-1] == "end"
    with pytest.raises(ValueError, match="jit_compile=False"):
        ours.generate(ids, streamer=seen.append, jit_compile=True)


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_a_warm_model_never_retraces():
    """Prompt and new-token lengths are padded to buckets: 8 prompts of 8 lengths (and 4
    max_new_tokens) after one call per bucket add no trace and no retracing warning; padding
    does not change a prompt's tokens."""
    assert [generation.bucket_length(n) for n in (1, 8, 9, 16, 17, 512, 513, 1100)] == \
        [8, 8, 16, 16, 32, 512, 1024, 1536]
    hf, ours = _models(_config(), seed=8)
    handler = _Warnings()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        # the handler sees TensorFlow's warning when a function does retrace
        noisy = tf.function(lambda x: x + 1)
        for n in range(1, 8):
            noisy(tf.zeros([n]))
        assert any("retracing" in m for m in handler.messages)
        handler.messages.clear()
        traced = generation._compiled(ours, False)
        for length in (4, 12):  # one call per bucket: 8 and 16
            ours.generate(_prompts(1, length), max_new_tokens=8, eos_token_id=None)
        count = traced.experimental_get_tracing_count()
        outputs = []
        for i, length in enumerate((1, 3, 5, 8, 9, 11, 14, 16)):
            prompt = _prompts(1, length, seed=20 + i)
            outputs.append((prompt, ours.generate(prompt, max_new_tokens=5 + i % 4,
                                                  eos_token_id=None)))
            assert outputs[-1][1].shape == (1, length + 5 + i % 4)
        assert traced.experimental_get_tracing_count() == count
    finally:
        logger.removeHandler(handler)
    assert not any("retracing" in m for m in handler.messages), handler.messages
    for i in (0, 5, 7):  # the bucket's padding does not change the tokens: HF's, unpadded
        prompt, got = outputs[i]
        theirs, _ = _hf_generate(hf, prompt, max_new_tokens=5 + i % 4, eos_token_id=None)
        np.testing.assert_array_equal(got, theirs)
