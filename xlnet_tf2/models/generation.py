"""Text generation with XLNet's memory: greedy, or sampling with temperature, top-k and top-p.

How a token is predicted (as HuggingFace's `XLNetLMHeadModel.generate`): a dummy token is
appended after the sequence, hidden from every position by `perm_mask`, and the query stream
at that position (`target_mapping`) predicts the next token from everything before it.

The cache. Each layer's input of every settled token is kept as memory (batch-major
[B, M, D]), so a step runs the model on 3 positions, not on the whole sequence:

  prefill   [prompt, dummy]          the prompt attends to itself bidirectionally; memory
                                     receives prompt[:-1]
  step k    [previous, newest, dummy] + memory; memory receives `previous`

`previous` is computed again once the newest token exists (HuggingFace's `offset = 2`), so
every token's memory has seen one token to its right. The result is exactly a recomputation of
the whole sequence at each step with this attention pattern (key j visible to position i):
prompt positions but the last see the whole prompt; any later position i sees j <= i + 1; the
dummy is seen by no one. `use_cache=False` runs that recomputation (the full sequence every
step, no memory): the tests check that both give the same tokens, and that greedy decoding
gives HuggingFace's tokens on the same weights.

Static shapes: the whole loop is one `tf.function` (optionally XLA-compiled) with a fixed-size
memory buffer of P + N - 3 slots (P prompt length, N new tokens), filled from the right; empty
slots and prompt padding are hidden with the model's `memory_mask`. One trace serves every
call with the same batch size, prompt length and settings.

Prompts in a batch are LEFT padded (attention_mask 0 on the padding): relative positions make
the padding invisible, so each row gives what it gives alone. Once a row emits `eos_token_id`
it continues with `pad_token_id`; the output stops at the step where every row has finished
(as HuggingFace's).

Short prompts and the padding text. XLNet was pretrained on 512-token segments and generates
poorly from a few words. The fix in common use (Aman Rusia's XLNet-gen, adopted by
HuggingFace's run_generation.py and text-generation pipeline) puts a long unrelated text ending
with an end-of-document marker before the prompt, and removes it from the output.
`generate_text` does that with `padding_text` (default `DEFAULT_PADDING_TEXT`, our own
paragraph; pass None to turn it off) followed by the `<eod>` id: `<eod>` is a control symbol,
so it is inserted by id (SentencePiece never produces it from text, and HuggingFace's
"<eod> </s> <eos>" string suffix is tokenizer-specific). The zihangdai/xlnet release has no
generation code.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from xlnet_tf2 import special_ids as sid

DUMMY_ID = 0  # the placeholder after the sequence; no position sees it, so its id is moot

DEFAULT_PADDING_TEXT = (
    "The survey ship left the harbour before dawn, loaded with instruments, spare rope and "
    "three months of food. Its captain had sailed these waters for twenty years and kept a "
    "careful log of every current, reef and sandbank she met. On the fourth day the wind "
    "turned against them, and the crew spent a long night taking in sail while the sea broke "
    "over the bow. By morning the storm had passed. The navigator measured the height of the "
    "sun at noon, marked their position on the chart and found that they had been carried "
    "forty miles to the south. They repaired a torn sail, checked the water casks and set a "
    "new course for the islands, where the work of mapping the coast would begin. In the "
    "evening the cook served fish caught that afternoon, and the youngest sailor played the "
    "fiddle on deck until the stars came out.")


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How a token is chosen from the logits: greedy (do_sample False) or sampled after
    temperature, then top-k (0 = off), then top-p (1.0 = off), as HuggingFace orders them."""
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}.")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 turns it off), got {self.top_k}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")


def filter_logits(logits: tf.Tensor, sampling: Sampling) -> tf.Tensor:
    """float32 [B, V] -> the logits to sample from: temperature, top-k, top-p applied; removed
    tokens are -inf. top-k keeps ties with the k-th value; top-p keeps the most probable
    tokens until their probability reaches top_p (at least one)."""
    logits = logits / sampling.temperature
    minus_inf = tf.fill(tf.shape(logits), -np.inf)
    if sampling.top_k > 0:
        k = min(sampling.top_k, logits.shape[-1])
        kth = tf.math.top_k(logits, k=k).values[:, -1:]                      # [B, 1]
        logits = tf.where(logits < kth, minus_inf, logits)
    if sampling.top_p < 1.0:
        order = tf.argsort(logits, axis=-1, direction="DESCENDING")          # [B, V]
        sorted_logits = tf.gather(logits, order, batch_dims=1)
        probs = tf.nn.softmax(sorted_logits, axis=-1)
        mass_before = tf.cumsum(probs, axis=-1, exclusive=True)
        remove_sorted = mass_before >= sampling.top_p                        # never the first
        remove = tf.scatter_nd(
            tf.stack([tf.repeat(tf.range(tf.shape(order)[0]), tf.shape(order)[1]),
                      tf.reshape(order, [-1])], axis=1),
            tf.reshape(remove_sorted, [-1]), tf.shape(logits))
        logits = tf.where(remove, minus_inf, logits)
    return logits


def _choose(logits, sampling: Sampling, seed, step):
    """int32 [B]: argmax, or a sample from the filtered logits (stateless: seed and step)."""
    if not sampling.do_sample:
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    sample = tf.random.stateless_categorical(filter_logits(logits, sampling), 1,
                                             seed=tf.stack([seed, step]), dtype=tf.int32)
    return sample[:, 0]


def _predict_last(batch, length):
    """perm_mask hiding the last position from all, target_mapping predicting it."""
    hide = tf.broadcast_to(tf.one_hot(length - 1, length)[None, None, :], [batch, length, length])
    target = tf.broadcast_to(tf.one_hot(length - 1, length)[None, None, :], [batch, 1, length])
    return hide, target


def _batch_size(input_ids):
    """The static batch size when known (loop variables must keep their shapes)."""
    return input_ids.shape[0] if input_ids.shape[0] is not None else tf.shape(input_ids)[0]


def _scores_array(n_new, output_scores, vocab):
    """Where each step's logits go; empty (and never written) without output_scores."""
    return tf.TensorArray(tf.float32, size=n_new if output_scores else 0,
                          element_shape=tf.TensorShape([None, vocab]))


class _Finisher:
    """HuggingFace's end-of-sequence rule: after a row emits eos it continues with pad."""

    def __init__(self, eos_token_id, pad_token_id):
        self.eos, self.pad = eos_token_id, pad_token_id

    def __call__(self, token, finished):
        if self.eos is None:
            return token, finished
        token = tf.where(finished, tf.constant(self.pad, tf.int32), token)
        return token, finished | tf.equal(token, self.eos)


def _cached_loop(model, input_ids, attention_mask, seed, n_new, sampling, finisher,
                 output_scores):
    """Prefill, then n_new - 1 three-position steps on the memory buffer (see module doc)."""
    c = model.config
    batch, p_len = _batch_size(input_ids), input_ids.shape[1]
    dummy = tf.fill([batch, 1], DUMMY_ID)
    hide, target = _predict_last(batch, p_len + 1)
    out = model({"input_ids": tf.concat([input_ids, dummy], 1),
                 "attention_mask": tf.concat([attention_mask, tf.ones_like(dummy)], 1),
                 "perm_mask": hide, "target_mapping": target},
                training=False, output_hidden_states=True)
    logits = out["logits"][:, 0]
    token, finished = finisher(_choose(logits, sampling, seed, 0),
                               tf.zeros([batch], tf.bool))
    tokens = tf.TensorArray(tf.int32, size=n_new).write(0, token)
    scores = _scores_array(n_new, output_scores, logits.shape[-1])
    if output_scores:
        scores = scores.write(0, logits)
    if n_new == 1:
        return tokens, scores

    slots = p_len + n_new - 3          # the most memory a step reads: P - 1 + N - 2 tokens
    empty = slots - (p_len - 1)
    states = out["hidden_states"][:c.n_layer]                      # layer inputs [B, P+1, D]
    memory = [tf.concat([tf.zeros([batch, empty, c.d_model], h.dtype), h[:, :p_len - 1]], 1)
              for h in states]                                     # right-aligned [B, S, D]
    memory_mask = tf.concat([tf.zeros([batch, empty], tf.int32),
                             tf.cast(attention_mask[:, :p_len - 1], tf.int32)], 1)
    hide3, target3 = _predict_last(batch, 3)

    def step(k, previous, newest, finished, memory, memory_mask, tokens, scores):
        out = model({"input_ids": tf.stack([previous, newest, dummy[:, 0]], 1),
                     "perm_mask": hide3, "target_mapping": target3,
                     "mems": memory, "memory_mask": memory_mask},
                    training=False, output_hidden_states=True)
        logits = out["logits"][:, 0]
        token, finished = finisher(_choose(logits, sampling, seed, k), finished)
        # `previous` is settled now (it has seen `newest`): its layer inputs join the memory.
        memory = [tf.concat([m[:, 1:], h[:, :1]], 1)
                  for m, h in zip(memory, out["hidden_states"][:c.n_layer])]
        memory_mask = tf.concat([memory_mask[:, 1:], tf.ones([batch, 1], tf.int32)], 1)
        tokens = tokens.write(k, token)
        if output_scores:
            scores = scores.write(k, logits)
        return k + 1, newest, token, finished, memory, memory_mask, tokens, scores

    results = tf.while_loop(lambda k, *_: k < n_new, step,
                            (tf.constant(1), input_ids[:, -1], token, finished, memory,
                             memory_mask, tokens, scores))
    return results[6], results[7]


def _full_sequence_loop(model, input_ids, attention_mask, seed, n_new, sampling, finisher,
                        output_scores):
    """No memory: the whole sequence every step, with the attention pattern the cache gives
    (module doc); static shapes [B, P + N] with unused positions hidden."""
    batch, p_len = _batch_size(input_ids), input_ids.shape[1]
    total = p_len + n_new
    i = tf.range(total)[:, None]
    j = tf.range(total)[None, :]
    pattern = tf.where(i < p_len - 1, j >= p_len, j > i + 1)            # [T, T] True = hidden
    ids = tf.concat([input_ids, tf.fill([batch, n_new], DUMMY_ID)], 1)
    mask = tf.concat([tf.cast(attention_mask, tf.int32), tf.ones([batch, n_new], tf.int32)], 1)

    def step(k, ids, finished, tokens, scores):
        length = p_len + k                                               # dummy at `length`
        hidden = tf.logical_or(pattern, j >= length)
        perm_mask = tf.broadcast_to(tf.cast(hidden, tf.float32)[None], [batch, total, total])
        target = tf.broadcast_to(tf.one_hot(length, total)[None, None], [batch, 1, total])
        out = model({"input_ids": ids, "attention_mask": mask, "perm_mask": perm_mask,
                     "target_mapping": target}, training=False)
        logits = out["logits"][:, 0]
        token, finished = finisher(_choose(logits, sampling, seed, k), finished)
        ids = tf.where(tf.equal(tf.range(total)[None], length), token[:, None], ids)
        tokens = tokens.write(k, token)
        if output_scores:
            scores = scores.write(k, logits)
        return k + 1, ids, finished, tokens, scores

    results = tf.while_loop(lambda k, *_: k < n_new, step,
                            (tf.constant(0), ids, tf.zeros([batch], tf.bool),
                             tf.TensorArray(tf.int32, size=n_new),
                             _scores_array(n_new, output_scores, model.config.n_token)))
    return results[3], results[4]


def _loop(model, input_ids, attention_mask, seed, *, n_new, sampling, use_cache, eos_token_id,
          pad_token_id, output_scores):
    finisher = _Finisher(eos_token_id, pad_token_id)
    run = _cached_loop if use_cache else _full_sequence_loop
    tokens, scores = run(model, input_ids, attention_mask, seed, n_new, sampling, finisher,
                         output_scores)
    tokens = tf.transpose(tokens.stack())                                    # [B, N]
    if output_scores:
        return tokens, tf.transpose(scores.stack(), [1, 0, 2])               # [B, N, V]
    return tokens, None


_COMPILED = weakref.WeakKeyDictionary()  # model -> {jit_compile: tf.function}


def _compiled(model, jit_compile: bool):
    functions = _COMPILED.setdefault(model, {})
    if jit_compile not in functions:
        # Python arguments are plain values (tf.function keys other objects, such as a
        # Sampling, by identity and would trace every call again).
        def run(input_ids, attention_mask, seed, n_new, sampling, use_cache, eos_token_id,
                pad_token_id, output_scores):
            return _loop(model, input_ids, attention_mask, seed, n_new=n_new,
                         sampling=Sampling(*sampling),
                         use_cache=use_cache, eos_token_id=eos_token_id,
                         pad_token_id=pad_token_id, output_scores=output_scores)
        functions[jit_compile] = tf.function(run, jit_compile=jit_compile)
    return functions[jit_compile]


@dataclasses.dataclass
class GenerateOutput:
    sequences: np.ndarray            # int32 [B, P + n]: prompt (as given) + new tokens
    scores: Optional[np.ndarray]     # float32 [B, n, V]: the logits each token was chosen from


def generate(model, input_ids, *, max_new_tokens: int = 20, attention_mask=None,
             do_sample: bool = False, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, seed: int = 0, eos_token_id: Optional[int] = sid.EOS_ID,
             pad_token_id: int = sid.PAD_ID, use_cache: bool = True, jit_compile: bool = False,
             output_scores: bool = False) -> Union[np.ndarray, GenerateOutput]:
    """Continues the prompts `input_ids` (int [B, P], left padded with attention_mask 0).

    Args:
      model: an XLNetLMHeadModel (bi_data must be off).
      max_new_tokens: N, the most tokens added.
      do_sample, temperature, top_k, top_p: greedy by default; see `Sampling`.
      seed: sampling seed (stateless: the same seed gives the same tokens).
      eos_token_id: a row that emits it continues with pad_token_id (None: never stop).
      use_cache: the memory (default); False recomputes the full sequence each step.
      jit_compile: XLA-compile the loop.
      output_scores: also return the logits of every step.
    Returns:
      int32 [B, P + n] (n <= N: generation stops once every row has emitted eos), or a
      `GenerateOutput` with output_scores.
    """
    if model.config.bi_data:
        raise ValueError("generate needs a model with bi_data off; load it with bi_data=False.")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}.")
    input_ids = np.asarray(input_ids, np.int32)
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be [batch, prompt_length > 0], got {input_ids.shape}.")
    mask = (np.ones_like(input_ids) if attention_mask is None
            else np.asarray(attention_mask, np.int32))
    if mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask {mask.shape} must match input_ids {input_ids.shape}.")
    if (mask[:, -1] == 0).any() or (np.diff(mask, axis=1) < 0).any():
        raise ValueError("Prompts must be left padded (attention_mask 0...0 1...1) and not "
                         "empty: XLNet predicts after the last position.")
    sampling = Sampling(do_sample, float(temperature), int(top_k), float(top_p))
    tokens, scores = _compiled(model, jit_compile)(
        tf.constant(input_ids), tf.constant(mask), tf.constant(seed, tf.int32),
        n_new=int(max_new_tokens), sampling=dataclasses.astuple(sampling),
        use_cache=bool(use_cache), eos_token_id=eos_token_id, pad_token_id=int(pad_token_id),
        output_scores=bool(output_scores))
    tokens = tokens.numpy()
    keep = tokens.shape[1]
    if eos_token_id is not None:
        ended = np.cumsum(tokens == eos_token_id, axis=1) > 0               # [B, N]
        all_ended = np.nonzero(ended.all(axis=0))[0]
        if len(all_ended):
            keep = int(all_ended[0]) + 1
    sequences = np.concatenate([input_ids, tokens[:, :keep]], axis=1)
    if output_scores:
        return GenerateOutput(sequences, scores.numpy()[:, :keep])
    return sequences


def generate_text(model, tokenizer, prompts: Union[str, Sequence[str]], *,
                  padding_text: Optional[str] = DEFAULT_PADDING_TEXT,
                  return_full_text: bool = True, **kwargs) -> List[str]:
    """Texts in, texts out: each prompt (after `padding_text` and <eod>, see the module doc)
    is continued by `generate(**kwargs)`; returns the prompt's text plus the continuation (or
    the continuation alone), special tokens and the padding text removed."""
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    prefix = [] if not padding_text else tokenizer.encode(padding_text,
                                                          add_special_tokens=False) + [sid.EOD_ID]
    rows = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    if any(not (prefix + r) for r in rows):
        raise ValueError("An empty prompt needs padding_text (XLNet predicts after the last "
                         "token).")
    width = max(len(prefix) + len(r) for r in rows)
    ids = np.full((len(rows), width), sid.PAD_ID, np.int32)
    mask = np.zeros((len(rows), width), np.int32)
    for b, r in enumerate(rows):
        ids[b, width - len(prefix) - len(r):] = prefix + r
        mask[b, width - len(prefix) - len(r):] = 1
    sequences = generate(model, ids, attention_mask=mask, **kwargs)
    texts = []
    for r, sequence in zip(rows, sequences):
        new = [int(t) for t in sequence[width:]]
        full = tokenizer.decode(r + new, skip_special_tokens=True)
        if return_full_text:
            texts.append(full)
        else:
            start = tokenizer.decode(r, skip_special_tokens=True)
            texts.append(full[len(start):].lstrip() if full.startswith(start)
                         else tokenizer.decode(new, skip_special_tokens=True))
    return texts
