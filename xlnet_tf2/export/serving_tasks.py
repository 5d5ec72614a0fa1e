"""Serving signatures of the exports: the text tasks' (classification, regression and the
backbone's features), multiple choice's (RACE) and SQuAD's; the other tasks' in modules of
their own. A task's declaration (xlnet_tf2/task_registry.py) names its builder (`serving`);
a builder is marked `signature_builder`, and saved_model.py's `signatures_of` finds a task's
by that name.

Letters (docs/GLOSSARY.md): B request rows, Q questions and C options of multiple choice, Wn
windows of a SQuAD context, L seq_len.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

import tensorflow as tf

from xlnet_tf2 import task_registry
from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.in_graph_tokenizer import require_utf8

# The builders marked `signature_builder`, by dotted name (a declaration's `serving`).
BUILDERS: Dict[str, Callable] = {}


def signature_builder(function: Callable) -> Callable:
    """Marks `function(module) -> {signature name: concrete function}` as the signature
    builder a task's declaration may name (its `serving`); returns it."""
    BUILDERS[f"{function.__module__}.{function.__qualname__}"] = function
    return function


def _ids_spec(name, rank=2):
    return tf.TensorSpec([None] * rank, tf.int32, name=name)


@signature_builder
def text_signatures(module):
    """serving_default (text [B], and text_b [B] for a paired task) and serve_token_ids
    (input_ids, segment_ids, attention_mask [B, L]), both returning the module's outputs
    (ServingModule._outputs): classification, regression and features."""
    L = module.seq_len

    @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("segment_ids"),
                                  _ids_spec("attention_mask")])
    def serve_token_ids(input_ids, segment_ids, attention_mask):
        input_ids, segment_ids, attention_mask = module._checked_lengths(
            input_ids, segment_ids, attention_mask)
        inputs = {"input_ids": tf.ensure_shape(input_ids, [None, L]),
                  "segment_ids": tf.ensure_shape(segment_ids, [None, L]),
                  "attention_mask": tf.ensure_shape(attention_mask, [None, L])}
        return module._outputs(inputs)

    if module.kind != "features" and module.spec.paired:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text"),
                                      tf.TensorSpec([None], tf.string, name="text_b")])
        def serve_text(text, text_b):
            text, text_b = require_utf8(text, "text"), require_utf8(text_b, "text_b")
            return module._outputs(module.preprocessor(text, text_b))
    else:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve_text(text):
            return module._outputs(module.preprocessor(require_utf8(text, "text")))
    return {"serving_default": serve_text.get_concrete_function(),
            "serve_token_ids": serve_token_ids.get_concrete_function()}


@signature_builder
def race_signatures(module):
    spec, L, C = module.spec, module.seq_len, module.spec.num_choices

    def ids_spec(name):
        return tf.TensorSpec([None, C, None], tf.int32, name=name)

    @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("segment_ids"),
                                  ids_spec("attention_mask")])
    def serve_token_ids(input_ids, segment_ids, attention_mask):
        input_ids, segment_ids, attention_mask = module._checked_lengths(
            input_ids, segment_ids, attention_mask, axis=2)
        inputs = {k: tf.ensure_shape(v, [None, C, L]) for k, v in
                  (("input_ids", input_ids), ("segment_ids", segment_ids),
                   ("attention_mask", attention_mask))}
        return module._outputs(inputs)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                  tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None, C], tf.string, name="options")])
    def serve_text(article, question, options):
        article, question, options = (require_utf8(article, "article"),
                                      require_utf8(question, "question"),
                                      require_utf8(options, "options"))
        batch = tf.shape(article)[0]
        qa = in_graph_packing.multiple_choice_texts(question, options)    # [Q*C]
        article_ids = module.tokenizer.encode_ids(tf.reshape(tf.repeat(article, C), [-1]))
        flat = in_graph_packing.encode_multiple_choice(
            article_ids, module.tokenizer.encode_ids(qa), L, spec.max_qa_length)
        return module._outputs({k: tf.reshape(v, [batch, C, L]) for k, v in flat.items()})

    return {"serving_default": serve_text.get_concrete_function(),
            "serve_token_ids": serve_token_ids.get_concrete_function()}


def best_span(outputs, doc_length: tf.Tensor, max_answer_length: int,
              max_context: Optional[tf.Tensor] = None):
    """The in-graph twin of xlnet_tf2.tasks.squad.window_candidates, per window: the
    best (start, end) of the head's k x e beam with both inside the document, end >= start,
    at most max_answer_length tokens and (given max_context bool [B, L]) a start where this
    window gives the token the most context; score = start + end log-prob.
    Returns start_index, end_index int32 [B] (-1 when no pair is valid) and score [B]
    (-inf when none); ties go to the first pair in (start rank, end rank) order."""
    starts = outputs["start_top_index"][:, :, None]                      # [B, k, 1]
    ends = outputs["end_top_index"]                                      # [B, k, e]
    starts = tf.broadcast_to(starts, tf.shape(ends))
    scores = outputs["start_top_log_probs"][:, :, None] + outputs["end_top_log_probs"]
    doc_length = doc_length[:, None, None]
    valid = ((starts < doc_length) & (ends < doc_length) & (ends >= starts)
             & (ends - starts + 1 <= max_answer_length))
    if max_context is not None:
        valid &= tf.gather(max_context, starts, batch_dims=1)
    batch = tf.shape(ends)[0]
    flat_valid = tf.reshape(valid, [batch, -1])                          # [B, k*e], i-major
    flat_scores = tf.where(flat_valid, tf.reshape(scores, [batch, -1]), -float("inf"))
    best = tf.argmax(flat_scores, axis=1, output_type=tf.int32)          # first maximum
    found = tf.reduce_any(flat_valid, axis=1)
    pick = lambda x: tf.gather(tf.reshape(x, [batch, -1]), best, batch_dims=1)
    return (tf.where(found, pick(starts), -1), tf.where(found, pick(ends), -1),
            tf.where(found, pick(scores), -float("inf")))


@signature_builder
def squad_signatures(module):
    """serving_default(question [B], context [B]): every document window of the context
    (doc_stride as in fine-tuning), answered as the offline prediction
    (xlnet_tf2.tasks.squad.postprocess) answers; outputs:
      answer string [B]: the best span over all windows as the RAW context substring (original
        casing and spacing, as predictions.json holds it); "" when no valid span;
      prediction string [B]: answer, or "" when no_answer (predictions.json's value);
      start_index / end_index int32 [B]: its first and last context token (indices into the
        whole context's tokens, inclusive); -1 = no valid span;
      answer_score float32 [B]: start + end log-probability of the span;
      no_answer_score float32 [B]: the smallest answer-class logit over the windows
        (null_odds; larger = more likely unanswerable);
      no_answer bool [B]: no_answer_score > null_score_threshold (SQuAD 2.0 models only) or no
        valid span; null_score_threshold float32 [B]: the trained run's threshold;
      num_windows int32 [B]: the windows the context needed.
    serve_token_ids(input_ids, segment_ids, attention_mask [B, L]) answers one given window
    (its positions before the first <sep> are the document); its answer is the window
    pieces' text ("▁" read as a space; the normalized context, not the raw one) and
    start/end_index are window positions; it has no prediction / num_windows outputs."""
    spec, L = module.spec, module.seq_len

    def no_answer_of(start, no_answer_score):
        no_answer = start < 0
        if spec.version_2_with_negative:
            no_answer |= no_answer_score > spec.null_score_threshold
        return no_answer

    def outputs_of(inputs):
        extra = in_graph_packing.squad_answer_inputs(inputs["input_ids"], inputs["segment_ids"],
                                                   inputs["attention_mask"])
        outputs = module.model({**inputs, "p_mask": extra["p_mask"],
                                "cls_index": extra["cls_index"]}, training=False)
        start, end, score = best_span(outputs, extra["doc_length"], spec.max_answer_length)
        pieces = module.tokenizer.id_to_piece(inputs["input_ids"])      # [B, L]
        positions = tf.range(L)[None, :]
        in_span = (positions >= start[:, None]) & (positions <= end[:, None])
        text = tf.strings.reduce_join(tf.where(in_span, pieces, ""), axis=1)
        text = tf.strings.strip(tf.strings.regex_replace(text, "\u2581", " "))
        no_answer_score = outputs["cls_logits"]
        return {"start_index": start, "end_index": end, "answer": text,
                "answer_score": score, "no_answer_score": no_answer_score,
                "no_answer": no_answer_of(start, no_answer_score),
                "null_score_threshold": tf.fill(tf.shape(start), spec.null_score_threshold)}

    def ids_spec(name):
        return tf.TensorSpec([None, None], tf.int32, name=name)

    @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("segment_ids"),
                                  ids_spec("attention_mask")])
    def serve_token_ids(input_ids, segment_ids, attention_mask):
        input_ids, segment_ids, attention_mask = module._checked_lengths(
            input_ids, segment_ids, attention_mask)
        return outputs_of({k: tf.ensure_shape(v, [None, L]) for k, v in
                           (("input_ids", input_ids), ("segment_ids", segment_ids),
                            ("attention_mask", attention_mask))})

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def serve_text(question, context):
        return answer_whole_contexts(module, require_utf8(question, "question"),
                                     require_utf8(context, "context"), no_answer_of)

    return {"serving_default": serve_text.get_concrete_function(),
            "serve_token_ids": serve_token_ids.get_concrete_function()}


def answer_whole_contexts(module, question, context, no_answer_of):
    """The serving_default outputs of squad_signatures for raw question / context [B]."""
    spec, L = module.spec, module.seq_len
    context_ids, char_start, char_end = module.tokenizer.encode_ids_with_char_spans(context)
    windows = in_graph_packing.squad_windows(context_ids, module.tokenizer.encode_ids(question),
                                           L, spec.doc_stride, spec.max_query_length)
    valid = windows["valid"]                                              # [B, Wn]
    where = tf.where(valid)                                               # [n, 2]
    inputs = {k: tf.gather_nd(windows[k], where) for k in
              ("input_ids", "segment_ids", "attention_mask", "p_mask", "cls_index")}
    outputs = module.model(inputs, training=False)                        # n windows
    start, end, score = best_span(outputs, tf.gather_nd(windows["doc_length"], where),
                                  spec.max_answer_length,
                                  tf.gather_nd(windows["max_context"], where))
    shape = tf.shape(valid, out_type=tf.int64)
    scatter = lambda values, default: tf.tensor_scatter_nd_update(
        tf.fill(shape, tf.constant(default, values.dtype)), where, values)
    score = scatter(score, -float("inf"))                                 # [B, Wn]
    start, end = scatter(start, -1), scatter(end, -1)
    cls_logits = scatter(tf.cast(outputs["cls_logits"], tf.float32), float("inf"))
    best = tf.argmax(score, axis=1, output_type=tf.int32)                 # first maximum
    found = tf.reduce_any(start >= 0, axis=1)
    pick = lambda x: tf.gather(x, best, batch_dims=1)
    offset = pick(windows["doc_offset"])
    first = tf.where(found, offset + pick(start), -1)
    last = tf.where(found, offset + pick(end), -1)
    safe = lambda ragged, index: tf.gather(  # (a column more: rows may have no tokens)
        tf.pad(ragged.to_tensor(0), [[0, 0], [0, 1]]), tf.maximum(index, 0)[:, None],
        batch_dims=1)[:, 0]
    begin_char = safe(char_start, first)
    end_char = safe(char_end, last)
    answer = tf.strings.substr(context, tf.cast(begin_char, tf.int32),
                               tf.cast(tf.maximum(end_char - begin_char, 0), tf.int32),
                               unit="UTF8_CHAR")
    answer = tf.where(found, answer, "")
    no_answer_score = tf.reduce_min(cls_logits, axis=1)
    no_answer = no_answer_of(first, no_answer_score)
    return {"start_index": first, "end_index": last, "answer": answer,
            "prediction": tf.where(no_answer, "", answer),
            "answer_score": tf.where(found, pick(score), -float("inf")),
            "no_answer_score": no_answer_score, "no_answer": no_answer,
            "null_score_threshold": tf.fill(tf.shape(first), spec.null_score_threshold),
            "num_windows": tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)}
