"""The serving signature of a token-classification export: raw sentences in, each word's tag
out, laid out in the graph exactly as tasks/token_classification.py lays out a CoNLL sentence
(words split on whitespace, each word's pieces, `<sep> <cls>`, left padding; the tag read at
each word's first piece; words past seq_len - 2 pieces tagged "O").

Letters (docs/GLOSSARY.md): B request rows, W words of the longest request row, L seq_len.
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tokenizers.in_graph_tokenizer import require_utf8


def layout_words(tokenizer, text: tf.Tensor, seq_len: int):
    """(inputs: input_ids, segment_ids, attention_mask int32 [B, L]; words: string ragged
    [B, (W)]; first: int32 ragged [B, (W)], the position of each word's first piece in its
    row, -1 for a word cut off by seq_len)."""
    words = tf.strings.split(text)                                        # [B, (W)]
    word_row = tf.cast(words.value_rowids(), tf.int32)                    # [N] (N words)
    pieces = tokenizer.encode_ids(words.flat_values)                      # [N, (P)]
    # A word of no piece (a lone control character) takes <unk>, as the offline layout.
    empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
    pieces = tf.concat([pieces, tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(empty)], sid.UNK_ID), empty)], axis=1)
    counts = tf.cast(pieces.row_lengths(), tf.int32)                      # [N]
    cumulative = tf.cumsum(counts)
    row_offset = tf.gather(tf.concat([[0], cumulative], 0),
                           tf.cast(words.row_starts(), tf.int32))         # [B]
    ends = cumulative - tf.gather(row_offset, word_row)                   # [N] within its row
    fits = ends <= seq_len - 2          # a prefix of each row's words: ends only grow
    keep = tf.repeat(fits, counts)
    kept = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(pieces.flat_values, keep),
        tf.cast(tf.boolean_mask(tf.repeat(word_row, counts), keep), tf.int64),
        nrows=tf.cast(tf.shape(text)[0], tf.int64))
    batch = tf.shape(text)[0]
    tokens = tf.concat([kept, tf.RaggedTensor.from_tensor(
        tf.tile([[sid.SEP_ID, sid.CLS_ID]], [batch, 1]), row_splits_dtype=tf.int64)], axis=1)
    length = tf.cast(tokens.row_lengths(), tf.int32)                      # [B]
    pad = seq_len - length
    right_padded = tokens.to_tensor(default_value=sid.PAD_ID, shape=[None, seq_len])
    position = tf.range(seq_len)[None, :] - pad[:, None]                  # [B, L]
    real = position >= 0
    input_ids = tf.where(real, tf.gather(right_padded, tf.maximum(position, 0), batch_dims=1),
                         sid.PAD_ID)
    segment_ids = tf.where(~real, sid.SEG_ID_PAD,
                           tf.where(position == length[:, None] - 1, sid.SEG_ID_CLS,
                                    sid.SEG_ID_A))
    inputs = {"input_ids": tf.ensure_shape(input_ids, [None, seq_len]),
              "segment_ids": tf.ensure_shape(segment_ids, [None, seq_len]),
              "attention_mask": tf.ensure_shape(tf.cast(real, tf.int32), [None, seq_len])}
    first = tf.where(fits, ends - counts + tf.gather(pad, word_row), -1)
    return inputs, words, words.with_flat_values(first)


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
        inputs, words, first = layout_words(module.tokenizer, require_utf8(text, "text"), L)
        return tags_of(inputs, words, first)

    return {"serving_default": serve_text.get_concrete_function()}
