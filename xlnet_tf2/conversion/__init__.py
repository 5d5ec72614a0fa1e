"""Checkpoint conversion between the original TF1 release, HuggingFace and our format,
task heads included."""

from xlnet_tf2.conversion.convert import (DEFAULT_SEQ_LEN, SOURCES, TARGETS, TaskOptions,
                                          convert_checkpoint)
from xlnet_tf2.conversion.readers import (CheckpointReadError, read_huggingface_directory,
                                          read_original_checkpoint)
from xlnet_tf2.conversion.to_huggingface import save_huggingface
from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights,
                                              huggingface_weight_map, original_weight_map)

__all__ = [
    "CheckpointReadError", "DEFAULT_SEQ_LEN", "SOURCES", "TARGETS", "TaskOptions",
    "WeightMismatchError", "assign_weights", "convert_checkpoint", "huggingface_weight_map",
    "original_weight_map", "read_huggingface_directory", "read_original_checkpoint",
    "save_huggingface",
]
