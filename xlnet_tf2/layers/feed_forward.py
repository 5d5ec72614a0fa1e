"""Position-wise feed-forward block: D -> d_inner -> D, dropout, residual, LayerNorm."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.relative_attention import normal_initializer


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

    def call(self, x, training=None):
        out = self._activation(self.layer_1(x))
        out = self.dropout(out, training=training)
        out = self.layer_2(out)
        out = self.dropout(out, training=training)
        return self.layer_norm(x + out)
