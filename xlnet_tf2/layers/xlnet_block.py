"""One XLNet layer: two-stream relative attention, then the shared feed-forward per stream."""

from __future__ import annotations

import keras

from xlnet_tf2.layers.feed_forward import PositionwiseFeedForward
from xlnet_tf2.layers.relative_attention import RelativeAttention


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

    def call(self, h, pos_emb, g=None, training=None, **attention_kwargs):
        """Returns (h_out [B, L, D], g_out [B, P, D]) with a query stream g, h_out alone
        without one (as RelativeAttention.call)."""
        if g is None:
            h = self.rel_attn(h, pos_emb, training=training, **attention_kwargs)
            return self.ff(h, training=training)
        h, g = self.rel_attn(h, pos_emb, g=g, training=training, **attention_kwargs)
        return self.ff(h, training=training), self.ff(g, training=training)
