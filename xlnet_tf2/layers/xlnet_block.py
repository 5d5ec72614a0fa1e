"""One XLNet layer: two-stream relative attention, then the position-wise feed-forward
(D -> d_inner -> D, dropout, residual, LayerNorm) shared by both streams."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.relative_attention import RelativeAttention, normal_initializer


def gelu_tanh(x):
    """GELU, tanh approximation (the original's; HuggingFace's `gelu_new`)."""
    return keras.activations.gelu(x, approximate=True)


_ACTIVATIONS = {"gelu": gelu_tanh, "relu": tf.nn.relu}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class PositionwiseFeedForward(keras.layers.Layer):
    """x [B, L, D] -> LayerNorm(x + dropout(layer_2(dropout(act(layer_1(x))))))."""

    def __init__(self, d_model: int, d_inner: int, activation: str = "gelu", dropout: float = 0.0,
                 initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"Unsupported ff_activation {activation!r}; use one of {sorted(_ACTIVATIONS)}.")
        self.d_model = d_model
        self.d_inner = d_inner
        self.activation_name = activation
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        init = normal_initializer(initializer_range)
        # Sublayers follow this layer's policy: one left on the global policy would cast a
        # mixed-precision layer's activations back to float32.
        policy = self.dtype_policy
        self.layer_1 = keras.layers.Dense(d_inner, kernel_initializer=init, name="layer_1",
                                          dtype=policy)
        self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=init, name="layer_2",
                                          dtype=policy)
        self.dropout = Dropout(dropout, name="dropout", dtype=policy)
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                          name="layer_norm", dtype=policy)
        self._activation = _ACTIVATIONS[activation]

    def build(self, input_shape=None):
        self.layer_1.build((None, None, self.d_model))
        self.layer_2.build((None, None, self.d_inner))
        self.layer_norm.build((None, None, self.d_model))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_inner=self.d_inner, activation=self.activation_name,
                      dropout=self.dropout_rate, initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config

    def call(self, x, training=None, plan=None):
        out = self._activation(self.layer_1(x))
        out = self.dropout(out, training=training, plan=plan)
        out = self.layer_2(out)
        out = self.dropout(out, training=training, plan=plan)
        return self.layer_norm(x + out)



@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetBlock(keras.layers.Layer):
    """Post-LayerNorm Transformer-XL layer applied to the content stream h [B, L, D] and,
    in pretraining, the query stream g [B, P, D]. Both streams share every weight.

    The layer index (`layer_index`) is stored so that layer-wise learning-rate decay can find
    a layer's depth structurally rather than by matching variable names.
    """

    def __init__(self, d_model: int, n_head: int, d_head: int, d_inner: int,
                 ff_activation: str = "gelu", dropout: float = 0.0, dropatt: float = 0.0,
                 initializer_range: float = 0.02, own_biases: bool = True, layer_index: int = 0,
                 **kwargs):
        super().__init__(**kwargs)
        self.layer_index = layer_index
        self._config = dict(d_model=d_model, n_head=n_head, d_head=d_head, d_inner=d_inner,
                            ff_activation=ff_activation, dropout=dropout, dropatt=dropatt,
                            initializer_range=initializer_range, own_biases=own_biases,
                            layer_index=layer_index)
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the block alone).
        self.rel_attn = RelativeAttention(d_model, n_head, d_head, dropout=dropout, dropatt=dropatt,
                                          initializer_range=initializer_range,
                                          own_biases=own_biases, name="rel_attn",
                                          dtype=self.dtype_policy)
        self.ff = PositionwiseFeedForward(d_model, d_inner, activation=ff_activation,
                                          dropout=dropout, initializer_range=initializer_range,
                                          name="ff", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.rel_attn.build()
        self.ff.build()
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(self._config)
        return config

    def call(self, h, pos_emb, g=None, training=None, plan=None, angle_table=None,
             direction_groups: int = 1, **attention_kwargs):
        """Returns (h_out [B, L, D], g_out [B, P, D]) with a query stream g, h_out alone
        without one (as RelativeAttention.call, which takes the other arguments). `plan`: the
        step's (layers/step_plan.py)."""
        position = dict(angle_table=angle_table, direction_groups=direction_groups)
        if g is None:
            h = self.rel_attn(h, pos_emb, training=training, plan=plan, **position,
                              **attention_kwargs)
            return self.ff(h, training=training, plan=plan)
        h, g = self.rel_attn(h, pos_emb, g=g, training=training, plan=plan, **position,
                             **attention_kwargs)
        return self.ff(h, training=training, plan=plan), self.ff(g, training=training, plan=plan)
