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
