"""Checkpoint conversion from the original TF1 release and from HuggingFace."""

from xlnet_tf2.conversion.convert import SOURCES, convert_checkpoint
from xlnet_tf2.conversion.readers import (CheckpointReadError, read_huggingface_directory,
                                          read_original_checkpoint)
from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights,
                                              huggingface_weight_map, original_weight_map)

__all__ = [
    "CheckpointReadError", "SOURCES", "WeightMismatchError", "assign_weights", "convert_checkpoint",
    "huggingface_weight_map", "original_weight_map", "read_huggingface_directory",
    "read_original_checkpoint",
]
