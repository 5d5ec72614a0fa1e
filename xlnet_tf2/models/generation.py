"""Text generation with XLNet's memory: greedy, sampling (temperature, top-k, top-p) or beam
search, with repetition penalty, several stop ids, several sequences per prompt and streaming,
giving HuggingFace's tokens on the same weights. How a token is predicted, the cache, the
static shapes, beam search, streaming and the padding text: docs/GENERATION.md.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from xlnet_tf2 import special_ids as sid
from xlnet_tf2 import tensorflow_build
from xlnet_tf2.models import memory as mem

DUMMY_ID = 0  # the placeholder after the sequence; no position sees it, so its id is moot
LENGTH_BUCKETS = (8, 16, 32, 64, 128, 256, 512)
IMPOSSIBLE = -1.0e9  # HF beam search's score for excluded continuations (kept: ties matter)

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


@dataclasses.dataclass(frozen=True)
class _Settings:
    """Everything fixed when the loop is traced (plain values: tf.function keys them by value)."""
    sampling: Tuple = dataclasses.astuple(Sampling())
    repetition_penalty: float = 1.0
    eos_ids: Tuple[int, ...] = ()
    pad_token_id: int = sid.PAD_ID
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: Union[bool, str] = False
    use_cache: bool = True
    output_scores: bool = False
    streaming: bool = False
    new_tokens_room: int = 8    # max_new_tokens bucketed: the buffers' room for new tokens


def bucket_length(n: int) -> int:
    """The padded length for n (prompt tokens or new tokens): the smallest of LENGTH_BUCKETS
    that holds it, or the next multiple of 512."""
    for bucket in LENGTH_BUCKETS:
        if n <= bucket:
            return bucket
    return -(-n // 512) * 512


def _choose(logits, sampling: Sampling, seed, step):
    """int32 [B]: argmax, or a sample from the (already filtered) logits (stateless)."""
    if not sampling.do_sample:
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    sample = tf.random.stateless_categorical(logits, 1, seed=tf.stack([seed, step]),
                                             dtype=tf.int32)
    return sample[:, 0]


def _process(logits, seen, s: _Settings, sampling: Sampling):
    """HF's logits processors in its order: repetition penalty, temperature, top-k, top-p."""
    if s.repetition_penalty != 1.0:
        logits = _penalize(logits, seen, s.repetition_penalty)
    if sampling.do_sample:
        logits = filter_logits(logits, sampling)
    return logits


def _penalize(scores, seen, penalty: float):
    """HF's repetition penalty on the tokens `seen` (bool [B, V]) in the row."""
    penalized = tf.where(scores < 0, scores * penalty, scores / penalty)
    return tf.where(seen, penalized, scores)


def _seen_in_prompt(input_ids, attention_mask, vocab: int):
    """bool [B, V]: which tokens the prompt holds (padding not counted)."""
    rows, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    index = tf.stack([tf.repeat(tf.range(rows), length), tf.reshape(input_ids, [-1])], axis=1)
    counts = tf.scatter_nd(index, tf.reshape(tf.cast(attention_mask, tf.int32), [-1]),
                           tf.stack([rows, vocab]))
    return counts > 0


def _mark_seen(seen, token, vocab: int):
    return tf.logical_or(seen, tf.one_hot(token, vocab, on_value=True, off_value=False))


def _is_stop(token, eos_ids):
    """bool, token's shape: whether the token is one of the stop ids."""
    return tf.reduce_any(tf.equal(token[..., None], tf.constant(eos_ids, tf.int32)), axis=-1)


class _StreamTarget:
    """Where the traced loop's tf.py_function sends each step's tokens (set per call, so one
    trace serves every streamer)."""
    callback: Optional[Callable[[np.ndarray], None]] = None


def _emit(token):
    def send(values):
        _StreamTarget.callback(values.numpy())
        return values

    out = tf.py_function(send, [token], tf.int32)
    out.set_shape(token.shape)
    return out  # the loop uses it, so the call happens, in order, every step


def _predict_last(batch, length):
    """perm_mask hiding the last position from all, target_mapping predicting it."""
    hide = tf.broadcast_to(tf.one_hot(length - 1, length)[None, None, :], [batch, length, length])
    target = tf.broadcast_to(tf.one_hot(length - 1, length)[None, None, :], [batch, 1, length])
    return hide, target


def _batch_size(input_ids):
    """The static batch size when known (loop variables must keep their shapes)."""
    return input_ids.shape[0] if input_ids.shape[0] is not None else tf.shape(input_ids)[0]


def _prefill(model, input_ids, attention_mask, memory_len: int):
    """Logits [B, V] after the prompt, and the memory: a right-aligned buffer of `memory_len`
    entries per layer ([B, memory_len, D]) holding the prompt but its last token, and its
    mask."""
    c = model.config
    batch, p_len = _batch_size(input_ids), input_ids.shape[1]
    dummy = tf.fill([batch, 1], DUMMY_ID)
    hide, target = _predict_last(batch, p_len + 1)
    out = model({"input_ids": tf.concat([input_ids, dummy], 1),
                 "attention_mask": tf.concat([attention_mask, tf.ones_like(dummy)], 1),
                 "perm_mask": hide, "target_mapping": target},
                training=False, output_hidden_states=True)
    memory, memory_mask = mem.prompt_memory(out["hidden_states"][:c.n_layer], attention_mask,
                                            memory_len)
    return out["logits"][:, 0], memory, memory_mask


def _advance(model, previous, newest, memory, memory_mask):
    """One three-position step: the logits after `newest`; `previous` (settled now that it
    has seen `newest`) joins the memory, the oldest entry leaves."""
    batch = _batch_size(previous)
    hide, target = _predict_last(batch, 3)
    out = model({"input_ids": tf.stack([previous, newest, tf.fill([batch], DUMMY_ID)], 1),
                 "perm_mask": hide, "target_mapping": target, "mems": memory,
                 "memory_mask": memory_mask}, training=False, output_hidden_states=True)
    memory, memory_mask = mem.push_memory(memory, memory_mask,
                                          out["hidden_states"][:model.config.n_layer])
    return out["logits"][:, 0], memory, memory_mask


class _Picker:
    """One step's choice shared by the cached and the full loop: process the logits, choose,
    apply the end rule, stream, record."""

    def __init__(self, s: _Settings, seed, vocab: int):
        self.s, self.sampling, self.seed, self.vocab = s, Sampling(*s.sampling), seed, vocab

    def initial(self, input_ids, attention_mask):
        batch = _batch_size(input_ids)
        seen = (_seen_in_prompt(input_ids, attention_mask, self.vocab)
                if self.s.repetition_penalty != 1.0 else tf.zeros([batch, 0], tf.bool))
        tokens = tf.fill([self.s.new_tokens_room, batch], self.s.pad_token_id)
        scores = tf.zeros([self.s.new_tokens_room if self.s.output_scores else 0, batch,
                           self.vocab])
        return seen, tf.zeros([batch], tf.bool), tokens, scores

    def __call__(self, k, logits, seen, finished, tokens, scores):
        s = self.s
        processed = _process(logits, seen, s, self.sampling)
        token = _choose(processed, self.sampling, self.seed, k)
        if s.eos_ids:
            token = tf.where(finished, tf.constant(s.pad_token_id, tf.int32), token)
            finished = finished | _is_stop(token, s.eos_ids)
        if s.streaming:
            token = _emit(token)
        tokens = tf.tensor_scatter_nd_update(tokens, [[k]], token[None])
        if s.output_scores:
            scores = tf.tensor_scatter_nd_update(scores, [[k]], processed[None])
        if s.repetition_penalty != 1.0:
            seen = _mark_seen(seen, token, self.vocab)
        return token, seen, finished, tokens, scores


def _cached_loop(model, input_ids, attention_mask, seed, n_new, s: _Settings):
    """Prefill, then one three-position step per new token (see the module doc)."""
    pick = _Picker(s, seed, model.config.n_token)
    memory_len = input_ids.shape[1] + s.new_tokens_room - 3    # the most memory a step reads
    logits, memory, memory_mask = _prefill(model, input_ids, attention_mask, memory_len)
    seen, finished, tokens, scores = pick.initial(input_ids, attention_mask)

    def step(k, logits, last, memory, memory_mask, seen, finished, tokens, scores):
        token, seen, finished, tokens, scores = pick(k, logits, seen, finished, tokens, scores)
        more = (k + 1 < n_new) & ~tf.reduce_all(finished)
        logits, memory, memory_mask = tf.cond(
            more, lambda: _advance(model, last, token, memory, memory_mask),
            lambda: (logits, memory, memory_mask))
        return k + 1, logits, token, memory, memory_mask, seen, finished, tokens, scores

    k, *_, tokens, scores = tf.while_loop(
        lambda k, *state: (k < n_new) & ~tf.reduce_all(state[5]), step,
        (tf.constant(0), logits, input_ids[:, -1], memory, memory_mask, seen, finished, tokens,
         scores))
    return k, tokens, scores


def _full_sequence_loop(model, input_ids, attention_mask, seed, n_new, s: _Settings):
    """No memory: the whole sequence every step, with the attention pattern the cache gives
    (module doc); static shapes [B, p_len + n_max] with unused positions hidden."""
    pick = _Picker(s, seed, model.config.n_token)
    batch, p_len = _batch_size(input_ids), input_ids.shape[1]
    total = p_len + s.new_tokens_room
    i = tf.range(total)[:, None]
    j = tf.range(total)[None, :]
    pattern = tf.where(i < p_len - 1, j >= p_len, j > i + 1)  # [total, total]: True = hidden
    ids = tf.concat([input_ids, tf.fill([batch, s.new_tokens_room], DUMMY_ID)], 1)
    mask = tf.concat([tf.cast(attention_mask, tf.int32),
                      tf.ones([batch, s.new_tokens_room], tf.int32)], 1)
    seen, finished, tokens, scores = pick.initial(input_ids, attention_mask)

    def step(k, ids, seen, finished, tokens, scores):
        length = p_len + k                                               # dummy at `length`
        hidden = tf.logical_or(pattern, j >= length)
        perm_mask = tf.broadcast_to(tf.cast(hidden, tf.float32)[None], [batch, total, total])
        target = tf.broadcast_to(tf.one_hot(length, total)[None, None], [batch, 1, total])
        logits = model({"input_ids": ids, "attention_mask": mask, "perm_mask": perm_mask,
                        "target_mapping": target}, training=False)["logits"][:, 0]
        token, seen, finished, tokens, scores = pick(k, logits, seen, finished, tokens, scores)
        ids = tf.where(tf.equal(tf.range(total)[None], length), token[:, None], ids)
        return k + 1, ids, seen, finished, tokens, scores

    k, _, _, _, tokens, scores = tf.while_loop(
        lambda k, ids, seen, finished, *_: (k < n_new) & ~tf.reduce_all(finished), step,
        (tf.constant(0), ids, seen, finished, tokens, scores))
    return k, tokens, scores


def _beam_loop(model, input_ids, attention_mask, n_new, s: _Settings):
    """HF's beam search (module doc) on the memory cache. Returns the finished hypotheses
    (tokens [B, beams, n_max], scores [B, beams], lengths [B, beams]), best first."""
    beams, vocab, n = s.num_beams, model.config.n_token, s.new_tokens_room
    batch = _batch_size(input_ids)
    keep = max(2, 1 + len(s.eos_ids)) * beams   # continuations kept per step
    fill = (s.pad_token_id or s.eos_ids[0]) if s.eos_ids else -1   # HF's output_fill_value
    logits, memory, memory_mask = _prefill(model, input_ids, attention_mask,
                                           input_ids.shape[1] + n - 3)
    # every beam starts as the prompt (one prefill, repeated); only beam 0 may continue first
    tile = lambda x: tf.repeat(x, beams, axis=0)  # noqa: E731
    seen = (tile(_seen_in_prompt(input_ids, attention_mask, vocab))
            if s.repetition_penalty != 1.0 else tf.zeros([batch * beams, 0], tf.bool))
    running = tf.fill([batch, beams, n], fill)
    running_scores = tf.tile(tf.constant([[0.0] + [IMPOSSIBLE] * (beams - 1)]), [batch, 1])
    done = tf.fill([batch, beams, n], fill)
    done_scores = tf.fill([batch, beams], IMPOSSIBLE)
    done_flags = tf.zeros([batch, beams], tf.bool)
    done_lengths = tf.zeros([batch, beams], tf.int32)
    improvable = tf.ones([batch, 1], tf.bool)
    top_beams = tf.range(keep) < beams
    positions = tf.range(n)

    def step(k, go, logits, last, memory, memory_mask, seen, running, running_scores, done,
             done_scores, done_flags, done_lengths, improvable):
        log_probs = tf.nn.log_softmax(logits)
        if s.repetition_penalty != 1.0:
            log_probs = _penalize(log_probs, seen, s.repetition_penalty)
        total = tf.reshape(log_probs, [batch, beams, vocab]) + running_scores[:, :, None]
        top_scores, top_index = tf.math.top_k(tf.reshape(total, [batch, beams * vocab]), keep)
        parent, token = top_index // vocab, top_index % vocab            # [B, keep]
        candidates = tf.gather(running, parent, batch_dims=1)             # [B, keep, n_max]
        candidates = tf.where(positions == k, token[..., None], candidates)
        ends = tf.fill(tf.shape(token), k + 1 >= n_new)
        if s.eos_ids:
            ends |= _is_stop(token, s.eos_ids)
        # the best num_beams continuations that go on
        go_on_scores = top_scores + tf.cast(ends, tf.float32) * IMPOSSIBLE
        chosen = tf.math.top_k(go_on_scores, beams).indices                # [B, beams]
        running = tf.gather(candidates, chosen, batch_dims=1)
        running_scores = tf.gather(go_on_scores, chosen, batch_dims=1)
        new_parent = tf.gather(parent, chosen, batch_dims=1)
        new_token = tf.reshape(tf.gather(token, chosen, batch_dims=1), [-1])
        # the ends among the top num_beams become finished hypotheses if they rank
        just_ended = ends & top_beams[None]
        ended_scores = top_scores / tf.cast(k + 1, tf.float32) ** s.length_penalty
        if s.early_stopping is True:
            full = tf.reduce_all(done_flags, axis=-1, keepdims=True)
            ended_scores += tf.cast(full, tf.float32) * IMPOSSIBLE
        ended_scores += tf.cast(~improvable, tf.float32) * IMPOSSIBLE
        ended_scores += tf.cast(~just_ended, tf.float32) * IMPOSSIBLE
        best = tf.math.top_k(tf.concat([done_scores, ended_scores], 1), beams).indices
        pick = lambda old, new: tf.gather(tf.concat([old, new], 1), best, batch_dims=1)  # noqa
        done = pick(done, candidates)
        done_scores = pick(done_scores, ended_scores)
        done_flags = pick(done_flags, just_ended)
        done_lengths = pick(done_lengths, tf.fill(tf.shape(token), k + 1))
        # HF's test whether a running beam can still beat the worst finished one
        if s.early_stopping == "never" and s.length_penalty > 0.0:
            best_length = n_new
        else:
            best_length = k + 1
        best_running = running_scores[:, :1] / tf.cast(best_length, tf.float32) ** s.length_penalty
        worst_done = tf.where(done_flags, tf.reduce_min(done_scores, 1, keepdims=True),
                              IMPOSSIBLE)
        improvable &= tf.reduce_any(best_running > worst_done, axis=-1, keepdims=True)
        go = tf.reduce_any(improvable) & ~tf.reduce_all(ends)
        if s.early_stopping is True:
            go &= ~tf.reduce_all(done_flags)
        # memory, last token and seen tokens follow the beams
        rows = tf.reshape(new_parent + tf.range(batch)[:, None] * beams, [-1])
        previous = tf.gather(last, rows)
        memory = [tf.gather(m, rows) for m in memory]
        memory_mask = tf.gather(memory_mask, rows)
        if s.repetition_penalty != 1.0:
            seen = _mark_seen(tf.gather(seen, rows), new_token, vocab)
        logits, memory, memory_mask = tf.cond(
            go, lambda: _advance(model, previous, new_token, memory, memory_mask),
            lambda: (tf.gather(logits, rows), memory, memory_mask))
        return (k + 1, go, logits, new_token, memory, memory_mask, seen, running,
                running_scores, done, done_scores, done_flags, done_lengths, improvable)

    state = tf.while_loop(
        lambda k, go, *_: go, step,
        (tf.constant(0), tf.constant(True), tile(logits), tile(input_ids[:, -1]),
         [tile(m) for m in memory], tile(memory_mask), seen, running, running_scores, done,
         done_scores, done_flags, done_lengths, improvable))
    return state[0], state[9], state[10], state[12]   # steps, tokens, scores, lengths


def _loop(model, input_ids, attention_mask, seed, n_new, settings: Tuple):
    s = _Settings(*settings)
    if s.num_beams > 1:
        return _beam_loop(model, input_ids, attention_mask, n_new, s)
    run = _cached_loop if s.use_cache else _full_sequence_loop
    k, tokens, scores = run(model, input_ids, attention_mask, seed, n_new, s)
    # steps, tokens [B, n_max], scores [B, n_max, V] (no lengths: every row has `steps`
    # tokens)
    return k, tf.transpose(tokens), tf.transpose(scores, [1, 0, 2]), tf.zeros([0], tf.int32)


_COMPILED = weakref.WeakKeyDictionary()  # model -> {jit_compile: tf.function}


def _compiled(model, jit_compile: bool):
    functions = _COMPILED.setdefault(model, {})
    if jit_compile not in functions:
        def run(input_ids, attention_mask, seed, n_new, settings):
            return _loop(model, input_ids, attention_mask, seed, n_new, settings)
        functions[jit_compile] = tf.function(run, jit_compile=jit_compile)
    return functions[jit_compile]


@dataclasses.dataclass
class GenerateOutput:
    sequences: np.ndarray            # int32 [rows, p_len + n]: prompt (as given) + new tokens
    scores: Optional[np.ndarray]     # float32 [rows, n, V]: the processed scores of each choice
    sequences_scores: Optional[np.ndarray] = None  # float32 [rows]: beam search's final scores


def generate(model, input_ids, *, max_new_tokens: int = 20, attention_mask=None,
             do_sample: bool = False, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, repetition_penalty: float = 1.0, num_beams: int = 1,
             num_return_sequences: int = 1, length_penalty: float = 1.0,
             early_stopping: Union[bool, str] = False, seed: int = 0,
             eos_token_id: Union[int, Sequence[int], None] = sid.EOS_ID,
             pad_token_id: int = sid.PAD_ID, streamer=None, use_cache: bool = True,
             jit_compile: bool = False,
             output_scores: bool = False) -> Union[np.ndarray, GenerateOutput]:
    """Continues the prompts `input_ids` (int [B, p_len], left padded with attention_mask 0).

    Args:
      model: an XLNetLMHeadModel (bi_data must be off).
      max_new_tokens: n_max, the most tokens added.
      do_sample, temperature, top_k, top_p: greedy by default; see `Sampling`.
      repetition_penalty: HF's (1.0 = off; > 1 discourages tokens already in the row).
      num_beams: > 1 for beam search (no sampling, no streaming, use_cache only).
      num_return_sequences: sequences per prompt: the best hypotheses of beam search (at most
        num_beams), or independent samples (do_sample); rows come prompt by prompt.
      length_penalty, early_stopping: beam search's (HF's meaning and defaults).
      seed: sampling seed (stateless: the same seed gives the same tokens).
      eos_token_id: a stop id or a list of them; a row that emits one continues with
        pad_token_id (None: never stop).
      streamer: called with each step's new tokens (int32 [rows]), or an object with put/end.
      use_cache: the memory (default); False recomputes the full sequence each step.
      jit_compile: XLA-compile the loop.
      output_scores: also return the processed scores of every step (beam search: the
        final score of each returned sequence).
    Returns:
      int32 [B * num_return_sequences, p_len + n] (n <= n_max: generation stops once every
      row has ended), or a `GenerateOutput` with output_scores.
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
    if input_ids.min() < 0 or input_ids.max() >= model.config.n_token:
        raise ValueError(f"input_ids must be in [0, {model.config.n_token}) (the vocabulary), "
                         f"got {input_ids.min()}..{input_ids.max()}.")
    eos_ids = _stop_ids(eos_token_id)
    sampling = Sampling(do_sample, float(temperature), int(top_k), float(top_p))
    _check_search(num_beams, num_return_sequences, do_sample, streamer, use_cache, jit_compile,
                  repetition_penalty, early_stopping)
    if num_beams == 1 and num_return_sequences > 1:  # independent samples: rows repeated
        input_ids = np.repeat(input_ids, num_return_sequences, axis=0)
        mask = np.repeat(mask, num_return_sequences, axis=0)
    settings = _Settings(dataclasses.astuple(sampling), float(repetition_penalty), eos_ids,
                         int(pad_token_id), int(num_beams), float(length_penalty),
                         early_stopping, bool(use_cache), bool(output_scores),
                         streamer is not None, bucket_length(int(max_new_tokens)))
    width = bucket_length(input_ids.shape[1])
    padded = np.pad(input_ids, ((0, 0), (width - input_ids.shape[1], 0)),
                    constant_values=sid.PAD_ID)
    padded_mask = np.pad(mask, ((0, 0), (width - mask.shape[1], 0)))
    _StreamTarget.callback = _stream_callback(streamer, input_ids)
    try:
        steps, tokens, scores, lengths = _compiled(model, jit_compile)(
            tf.constant(padded), tf.constant(padded_mask), tf.constant(seed, tf.int32),
            tf.constant(int(max_new_tokens), tf.int32), dataclasses.astuple(settings))
    finally:
        _StreamTarget.callback = None
        if streamer is not None and hasattr(streamer, "end"):
            streamer.end()
    if num_beams > 1:
        return _beam_outputs(input_ids, tokens.numpy(), scores.numpy(), lengths.numpy(),
                             num_return_sequences, output_scores)
    keep = int(steps.numpy())
    sequences = np.concatenate([input_ids, tokens.numpy()[:, :keep]], axis=1)
    if output_scores:
        return GenerateOutput(sequences, scores.numpy()[:, :keep])
    return sequences


def _stop_ids(eos_token_id) -> Tuple[int, ...]:
    if eos_token_id is None:
        return ()
    if isinstance(eos_token_id, (int, np.integer)):
        return (int(eos_token_id),)
    return tuple(int(i) for i in eos_token_id)


def _check_search(num_beams, num_return_sequences, do_sample, streamer, use_cache,
                  jit_compile, repetition_penalty, early_stopping):
    if num_beams < 1 or num_return_sequences < 1:
        raise ValueError("num_beams and num_return_sequences must be >= 1.")
    if repetition_penalty <= 0:
        raise ValueError(f"repetition_penalty must be positive, got {repetition_penalty}.")
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', got "
                         f"{early_stopping!r}.")
    if streamer is not None and jit_compile:
        raise ValueError("A streamer needs jit_compile=False (XLA cannot call back to Python).")
    if jit_compile and tensorflow_build.xla_on_cpu_missing() and not tf.config.list_logical_devices(
            "TPU"):
        raise ValueError(f"jit_compile=True: {tensorflow_build.xla_on_cpu_missing()}; generate "
                         "with jit_compile=False here.")
    if num_beams > 1:
        if do_sample:
            raise ValueError("Beam search with sampling is not supported: use num_beams=1 "
                             "with do_sample, or do_sample=False with num_beams.")
        if num_return_sequences > num_beams:
            raise ValueError(f"num_return_sequences ({num_return_sequences}) must be at most "
                             f"num_beams ({num_beams}).")
        if streamer is not None:
            raise ValueError("A streamer cannot follow beam search (the best beam is known "
                             "only at the end).")
        if not use_cache:
            raise ValueError("Beam search runs on the memory cache: use_cache must be True.")
    elif num_return_sequences > 1 and not do_sample:
        raise ValueError("Greedy decoding gives one sequence per prompt: use do_sample=True or "
                         "num_beams >= num_return_sequences.")


def _stream_callback(streamer, prompt_ids):
    """The function the loop calls with each step's tokens (None without a streamer)."""
    if streamer is None:
        return None
    if hasattr(streamer, "put"):
        streamer.put(prompt_ids)
        return streamer.put
    return streamer


def _beam_outputs(prompts, tokens, scores, lengths, count, output_scores):
    """The best `count` hypotheses per prompt after the prompt, cut to the longest one."""
    batch = tokens.shape[0]
    new = tokens[:, :count].reshape(batch * count, -1)
    keep = int(lengths[:, :count].max())
    sequences = np.concatenate([np.repeat(prompts, count, axis=0), new[:, :keep]], axis=1)
    if output_scores:
        return GenerateOutput(sequences, None, scores[:, :count].reshape(-1))
    return sequences


def generate_text(model, tokenizer, prompts: Union[str, Sequence[str]], *,
                  padding_text: Optional[str] = DEFAULT_PADDING_TEXT,
                  return_full_text: bool = True, **kwargs) -> List[str]:
    """Texts in, texts out: each prompt (after `padding_text` and <eod>, see the module doc)
    is continued by `generate(**kwargs)`; returns the prompt's text plus the continuation (or
    the continuation alone), special tokens and the padding text removed; with
    num_return_sequences, that many texts per prompt, prompt by prompt."""
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
    per_prompt = len(sequences) // len(rows)
    texts = []
    for i, sequence in enumerate(sequences):
        r = rows[i // per_prompt]
        new = [int(t) for t in sequence[width:]]
        full = tokenizer.decode(r + new, skip_special_tokens=True)
        if return_full_text:
            texts.append(full)
        else:
            start = tokenizer.decode(r, skip_special_tokens=True)
            texts.append(full[len(start):].lstrip() if full.startswith(start)
                         else tokenizer.decode(new, skip_special_tokens=True))
    return texts
