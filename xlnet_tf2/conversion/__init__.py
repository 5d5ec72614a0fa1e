"""Checkpoint conversion from the original TF1 release and from HuggingFace."""

from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights,
                                              huggingface_weight_map, original_weight_map)

__all__ = ["WeightMismatchError", "assign_weights", "huggingface_weight_map", "original_weight_map"]
