"""Checkpoint conversion from the original TF1 release and from HuggingFace.

Every public name is imported on first use: the command's settings
(xlnet_tf2.conversion.convert_config) load without TensorFlow, so `--help` stays fast.
"""

from xlnet_tf2.lazy_names import lazy_names

_LAZY = {
    "SOURCES": "xlnet_tf2.conversion.convert_config",
    "convert_checkpoint": "xlnet_tf2.conversion.convert",
    "CheckpointReadError": "xlnet_tf2.conversion.readers",
    "read_huggingface_directory": "xlnet_tf2.conversion.readers",
    "read_original_checkpoint": "xlnet_tf2.conversion.readers",
    "WeightMismatchError": "xlnet_tf2.conversion.weight_maps",
    "assign_weights": "xlnet_tf2.conversion.weight_maps",
    "huggingface_weight_map": "xlnet_tf2.conversion.weight_maps",
    "original_weight_map": "xlnet_tf2.conversion.weight_maps",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
