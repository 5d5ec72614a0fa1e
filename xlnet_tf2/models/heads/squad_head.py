"""SQuAD head: start logits, end logits conditioned on the start, and an answer-class logit.

Letters (docs/GLOSSARY.md): B batch, L sequence length, D model width, k start_n_top, e end_n_top.

Training (gold `start_positions` given): end logits are computed from the gold start's
representation. Inference: the top-k starts by log-probability, for each of them the end
distribution conditioned on that start, and its top-e ends (a k x e beam). The answer-class
logit (SQuAD 2.0: larger = more likely unanswerable) reads the `<cls>` feature and the
start-probability-weighted feature, as the original.

`p_mask` [B, L] is 1 where a token cannot be a start or end (question, separators, padding);
those logits are pushed to -1e30. `<cls>` stays unmasked (p_mask 0): it is the start/end
label of windows that do not contain the answer, as in the original, so its logit must be
finite for the cross-entropy; post-processing never returns it as an answer.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.xlnet_block import normal_initializer

_NEG = -1e30


def _masked(logits, p_mask):
    p_mask = tf.cast(p_mask, tf.float32)
    return logits * (1.0 - p_mask) + _NEG * p_mask


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SquadHead(keras.layers.Layer):
    def __init__(self, d_model: int, start_n_top: int = 5, end_n_top: int = 5,
                 dropout: float = 0.1, initializer_range: float = 0.02, layer_norm_eps: float = 1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        init = normal_initializer(initializer_range)
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the head alone).
        policy = self.dtype_policy
        self.start_logit = keras.layers.Dense(1, kernel_initializer=init, name="start_logits",
                                              dtype=policy)
        self.end_hidden = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=init,
                                             name="end_logits_0", dtype=policy)
        self.end_norm = keras.layers.LayerNormalization(epsilon=layer_norm_eps,
                                                        name="end_logits_ln", dtype=policy)
        self.end_logit = keras.layers.Dense(1, kernel_initializer=init, name="end_logits_1",
                                            dtype=policy)
        self.answer_hidden = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=init,
                                                name="answer_class_0", dtype=policy)
        self.answer_logit = keras.layers.Dense(1, use_bias=False, kernel_initializer=init,
                                               name="answer_class_1", dtype=policy)
        self.dropout = Dropout(dropout, dtype=policy)

    def build(self, input_shape=None):
        d = self.d_model
        self.start_logit.build((None, d))
        self.end_hidden.build((None, 2 * d))
        self.end_norm.build((None, d))
        self.end_logit.build((None, d))
        self.answer_hidden.build((None, 2 * d))
        self.answer_logit.build((None, d))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, start_n_top=self.start_n_top,
                      end_n_top=self.end_n_top, dropout=self.dropout_rate,
                      initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
        return config

    def _end_logits(self, hidden, start_features, p_mask):
        """hidden [B, L, D], start_features [B, k, D] -> masked end logits [B, k, L]."""
        length = tf.shape(hidden)[1]
        k = tf.shape(start_features)[1]
        h = tf.broadcast_to(hidden[:, None], [tf.shape(hidden)[0], k, length, self.d_model])
        s = tf.broadcast_to(start_features[:, :, None], tf.shape(h))
        x = self.end_norm(self.end_hidden(tf.concat([h, tf.cast(s, h.dtype)], axis=-1)))
        logits = tf.cast(self.end_logit(x)[..., 0], tf.float32)       # [B, k, L]
        return _masked(logits, p_mask[:, None, :])

    def call(self, hidden, p_mask, cls_index, start_positions=None, training=None, plan=None):
        """Returns a dict of float32 tensors:

        always: start_logits [B, L] (masked), cls_logits [B];
        with start_positions [B]: end_logits [B, L] (masked);
        without: start_top_log_probs / start_top_index [B, k],
                 end_top_log_probs / end_top_index [B, k, e].
        """
        # Index inputs may arrive as floats (Keras traces a default float signature on save).
        cls_index = tf.cast(cls_index, tf.int32)
        start_logits = _masked(tf.cast(self.start_logit(hidden)[..., 0], tf.float32), p_mask)
        start_probs = tf.nn.softmax(start_logits, axis=-1)                      # [B, L]
        outputs = {"start_logits": start_logits}
        if start_positions is not None:
            start_positions = tf.cast(start_positions, tf.int32)
            start_feature = tf.gather(hidden, start_positions, batch_dims=1)    # [B, D]
            outputs["end_logits"] = self._end_logits(hidden, start_feature[:, None], p_mask)[:, 0]
        else:
            start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
            top_start_lp, top_start = tf.math.top_k(start_log_probs, k=self.start_n_top)  # [B, k]
            start_features = tf.gather(hidden, top_start, batch_dims=1)         # [B, k, D]
            end_log_probs = tf.nn.log_softmax(self._end_logits(hidden, start_features, p_mask))
            top_end_lp, top_end = tf.math.top_k(end_log_probs, k=self.end_n_top)  # [B, k, e]
            outputs.update(start_top_log_probs=top_start_lp, start_top_index=top_start,
                           end_top_log_probs=top_end_lp, end_top_index=top_end)
        cls_feature = tf.gather(hidden, cls_index, batch_dims=1)                # [B, D]
        start_weighted = tf.einsum("bld,bl->bd", hidden, tf.cast(start_probs, hidden.dtype))
        x = self.answer_hidden(tf.concat([start_weighted, cls_feature], axis=-1))
        x = self.dropout(x, training=training, plan=plan)
        outputs["cls_logits"] = tf.cast(self.answer_logit(x)[:, 0], tf.float32)
        return outputs
