"""Serving signatures of the multiple-choice (RACE) export; see saved_model.py for the rest.

Dimension glossary: B questions, C options, L seq_len.
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2.export import serving_inputs


def _keep_last(ids: tf.RaggedTensor, keep: int) -> tf.RaggedTensor:
    lengths = ids.row_lengths()
    positions = tf.ragged.range(lengths)
    return tf.ragged.boolean_mask(ids, positions >= (lengths - keep)[:, None])


def race_signatures(module):
    spec, L, C = module.spec, module.seq_len, module.spec.num_choices

    def ids_spec(name):
        return tf.TensorSpec([None, C, None], tf.int32, name=name)

    @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("segment_ids"),
                                  ids_spec("attention_mask")])
    def serve_token_ids(input_ids, segment_ids, attention_mask):
        tf.debugging.assert_equal(tf.shape(input_ids)[2], L, message=(
            f"serve_token_ids takes [batch, {C}, seq_len={L}] ids"))
        inputs = {k: tf.ensure_shape(v, [None, C, L]) for k, v in
                  (("input_ids", input_ids), ("segment_ids", segment_ids),
                   ("attention_mask", attention_mask))}
        return module._outputs(inputs)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                  tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None, C], tf.string, name="options")])
    def serve_text(article, question, options):
        batch = tf.shape(article)[0]
        questions = tf.reshape(tf.repeat(question, C), [-1])             # [B*C]
        flat_options = tf.reshape(options, [-1])                          # [B*C]
        # str.replace("_", option): escape the rewrite string's backslashes.
        rewrite = tf.strings.regex_replace(flat_options, r"\\", r"\\\\")
        blank = tf.strings.regex_full_match(questions, "(?s).*_.*")
        filled = tf.map_fn(lambda qo: tf.strings.regex_replace(qo[0], "_", qo[1]),
                           (questions, rewrite), fn_output_signature=tf.string)
        qa = tf.where(blank, filled, tf.strings.join([questions, flat_options], " "))
        qa_ids = _keep_last(module.tokenizer.encode_ids(qa), spec.max_qa_length)
        article_ids = module.tokenizer.encode_ids(tf.reshape(tf.repeat(article, C), [-1]))
        keep = tf.maximum(L - 3 - qa_ids.row_lengths(), 0)
        positions = tf.ragged.range(article_ids.row_lengths())
        context = tf.ragged.boolean_mask(article_ids, positions < keep[:, None])
        flat = serving_inputs.encode_sequence_pair(context, qa_ids, L, "cls_last")
        return module._outputs({k: tf.reshape(v, [batch, C, L]) for k, v in flat.items()})

    return {"serving_default": serve_text.get_concrete_function(),
            "serve_token_ids": serve_token_ids.get_concrete_function()}


def best_span(outputs, doc_length: tf.Tensor, max_answer_length: int):
    """The in-graph twin of xlnet_tf2.finetuning.squad.window_candidates for one window per
    question: the best (start, end) of the head's k x e beam with both inside the document,
    end >= start and at most max_answer_length tokens; score = start + end log-prob.
    Returns start_index, end_index int32 [B] (-1 when no pair is valid) and score [B]."""
    starts = outputs["start_top_index"][:, :, None]                      # [B, k, 1]
    ends = outputs["end_top_index"]                                      # [B, k, e]
    starts = tf.broadcast_to(starts, tf.shape(ends))
    scores = outputs["start_top_log_probs"][:, :, None] + outputs["end_top_log_probs"]
    doc_length = doc_length[:, None, None]
    valid = ((starts < doc_length) & (ends < doc_length) & (ends >= starts)
             & (ends - starts + 1 <= max_answer_length))
    batch = tf.shape(ends)[0]
    flat_valid = tf.reshape(valid, [batch, -1])                          # [B, k*e], i-major
    flat_scores = tf.where(flat_valid, tf.reshape(scores, [batch, -1]), -float("inf"))
    best = tf.argmax(flat_scores, axis=1, output_type=tf.int32)          # first maximum
    found = tf.reduce_any(flat_valid, axis=1)
    pick = lambda x: tf.gather(tf.reshape(x, [batch, -1]), best, batch_dims=1)
    return (tf.where(found, pick(starts), -1), tf.where(found, pick(ends), -1),
            tf.where(found, pick(scores), -float("inf")))


def squad_signatures(module):
    """serving_default(question [B], context [B]) and serve_token_ids; outputs:
    start_index / end_index int32 [B]: answer tokens (inclusive) in the sequence, which starts
      with the context's tokens, so they are also context token indices; -1 = no valid span;
    answer string [B]: the answer tokens' pieces joined, "▁" read as a space, stripped; that
      is the span of the NORMALIZED context (preprocess_text: whitespace collapsed, `` and ''
      as ", accents dropped), not the raw context; "" when no span; <unk> for unknown chars;
    answer_score float32 [B]: start + end log-probability of the span;
    no_answer_score float32 [B]: the answer-class logit (larger = more likely unanswerable;
      SQuAD 2.0 predicts no answer above the trained run's null_score_threshold, also output);
    no_answer bool [B]: no_answer_score > null_score_threshold (always false for SQuAD 1.1
      models) or no valid span.
    Only the first window is served: a context longer than seq_len - 3 - len(question)
    tokens is cut (no stride)."""
    spec, L = module.spec, module.seq_len

    def outputs_of(inputs):
        extra = serving_inputs.squad_answer_inputs(inputs["input_ids"], inputs["segment_ids"],
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
        no_answer = start < 0
        if spec.version_2_with_negative:
            no_answer |= no_answer_score > spec.null_score_threshold
        return {"start_index": start, "end_index": end, "answer": text,
                "answer_score": score, "no_answer_score": no_answer_score,
                "no_answer": no_answer,
                "null_score_threshold": tf.fill(tf.shape(start), spec.null_score_threshold)}

    def ids_spec(name):
        return tf.TensorSpec([None, None], tf.int32, name=name)

    @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("segment_ids"),
                                  ids_spec("attention_mask")])
    def serve_token_ids(input_ids, segment_ids, attention_mask):
        module._check_ids(input_ids)
        return outputs_of({k: tf.ensure_shape(v, [None, L]) for k, v in
                           (("input_ids", input_ids), ("segment_ids", segment_ids),
                            ("attention_mask", attention_mask))})

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def serve_text(question, context):
        inputs = serving_inputs.encode_squad(module.tokenizer.encode_ids(context),
                                             module.tokenizer.encode_ids(question), L,
                                             spec.max_query_length)
        return outputs_of(inputs)

    return {"serving_default": serve_text.get_concrete_function(),
            "serve_token_ids": serve_token_ids.get_concrete_function()}
