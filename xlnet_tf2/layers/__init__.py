"""Keras 3 layers of XLNet: relative attention, feed-forward, masks and position encoding."""

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.relative_position import (build_attention_masks, causal_mask,
                                                gather_relative_scores, rel_shift,
                                                relative_position_encoding, segment_matrix)
from xlnet_tf2.layers.xlnet_block import (PositionwiseFeedForward, RelativeAttention, XLNetBlock,
                                         gelu_tanh)

__all__ = [
    "Dropout", "PositionwiseFeedForward", "RelativeAttention", "XLNetBlock", "build_attention_masks",
    "causal_mask", "gather_relative_scores", "gelu_tanh", "rel_shift", "relative_position_encoding",
    "segment_matrix",
]
