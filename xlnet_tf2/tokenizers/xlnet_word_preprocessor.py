"""Words to model inputs for token classification, in the graph: each word's pieces, then
`<sep> <cls>`, left-padded to seq_len (the layout of every task), and where each word's first
piece landed, the position its tag is read from. The same layout as
tasks/token_classification.py's offline `encode_words`, token for token
(tests/export/test_export_token_classifier.py). Used by `XLNetWordPreprocessor` (the
keras-hub-style model's) and the SavedModel's signature.

Letters (docs/GLOSSARY.md): B rows, W words of the longest row, N words in all, L seq_len.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor

FIRST_PIECE = "first_piece"  # the preprocessor's extra output: ragged [B, (W)]


def layout_words(encode_ids, words: tf.RaggedTensor, seq_len: int):
    """(inputs: input_ids, segment_ids, attention_mask int32 [B, L]; first: int32 ragged
    [B, (W)], the position of each word's first piece in its row, -1 for a word cut off by
    seq_len) of words, string ragged [B, (W)]; encode_ids: strings [N] -> ids [N, (P)]."""
    word_row = tf.cast(words.value_rowids(), tf.int32)                    # [N] (N words)
    pieces = encode_ids(words.flat_values)                      # [N, (P)]
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
        nrows=words.nrows())
    batch = tf.cast(words.nrows(), tf.int32)
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
    return inputs, words.with_flat_values(first)



@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetWordPreprocessor(XLNetPreprocessor):
    """Words -> token dicts for token classification: a ragged string tensor or a list of
    word lists [B, (W)], or sentences [B] (split on whitespace). Returns input_ids,
    segment_ids, attention_mask int32 [B, L] and FIRST_PIECE int32 ragged [B, (W)] (each
    word's first-piece position, -1 past seq_len)."""

    def __init__(self, spm_model, seq_len: int, lower: bool = False, **kwargs):
        kwargs.pop("layout", None)
        super().__init__(spm_model, seq_len, layout="cls_last", lower=lower, **kwargs)

    def call(self, words, text_b=None):
        if text_b is not None:
            raise ValueError("token classification reads one sentence per example.")
        if isinstance(words, (list, tuple)):
            words = tf.ragged.constant(words, tf.string)
        if not isinstance(words, tf.RaggedTensor):
            words = tf.strings.split(tf.convert_to_tensor(words, tf.string))
        inputs, first = layout_words(self.encode_ids, words, self.seq_len)
        return {**inputs, FIRST_PIECE: first}
