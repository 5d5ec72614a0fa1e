"""The serving signature of a token-classification export: raw sentences in, each word's tag
out. Words are split on whitespace and laid out by tokenizers/xlnet_word_preprocessor.py
exactly as tasks/token_classification.py lays out a CoNLL sentence; the tag is read at each
word's first piece, words past seq_len - 2 pieces are tagged "O".

Letters (docs/GLOSSARY.md): B request rows, W words of the longest request row, L seq_len.
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2.export.serving_tasks import signature_builder
from xlnet_tf2.tokenizers.in_graph_tokenizer import require_utf8
from xlnet_tf2.tokenizers.xlnet_word_preprocessor import layout_words


@signature_builder
def token_classification_signatures(module):
    """serving_default: text [B] string -> words [B, W] string, tags [B, W] string (both ""
    past a row's words), tag_ids [B, W] int32 (-1 there), num_words [B] int32."""
    L = module.seq_len
    labels = list(module.spec.label_list)
    label_names = tf.constant(labels)
    outside = labels.index("O") if "O" in labels else 0

    def tags_of(inputs, words, first):
        logits = module.model(inputs, training=False)["logits"]            # [B, L, C]
        best = tf.argmax(logits, axis=-1, output_type=tf.int32)            # [B, L]
        where = tf.stack([tf.cast(first.value_rowids(), tf.int32),
                          tf.maximum(first.flat_values, 0)], axis=1)
        # A word cut off by seq_len is "O" (the first label without one), as in evaluation.
        ids = first.with_flat_values(tf.where(first.flat_values >= 0,
                                              tf.gather_nd(best, where), outside))
        return {"words": words.to_tensor(""), "tags": tf.gather(label_names, ids).to_tensor(""),
                "tag_ids": ids.to_tensor(-1),
                "num_words": tf.cast(words.row_lengths(), tf.int32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve_text(text):
        words = tf.strings.split(require_utf8(text, "text"))              # [B, (W)]
        inputs, first = layout_words(module.tokenizer.encode_ids, words, L)
        return tags_of(inputs, words, first)

    return {"serving_default": serve_text.get_concrete_function()}
