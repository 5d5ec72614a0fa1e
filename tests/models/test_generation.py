"""Generation: greedy tokens and per-step logits equal HuggingFace's XLNetLMHeadModel.generate
on the same weights (eos handling included); the memory cache gives exactly the tokens of a
full recomputation; left-padded batches equal rows alone; sampling filters (hand-worked) and
seeded sampling; XLA; the text helper with the padding text."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from xlnet_tf2.models import generation

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fixtures.hf_reference import ours_from_hf, random_hf_model  # noqa: E402

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
