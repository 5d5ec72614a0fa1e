"""The checkpoint formats of the original TF1 release and HuggingFace, and their maps onto our
models' variables, task heads included: reading one into a model the caller built
(convert.py: `read_foreign`, `fill`), writing HuggingFace's (to_huggingface.py). Nothing here
imports a model class: models/pretrained.py loads through it, and models/directories.py's
`convert_checkpoint` is xlnet-convert's directory job.

Every public name is imported on first use: the command's settings
(xlnet_tf2.conversion.convert_config) load without TensorFlow, so `--help` stays fast.
"""

from xlnet_tf2.lazy_names import lazy_names

_LAZY = {
    "DEFAULT_SEQ_LEN": "xlnet_tf2.conversion.convert_config",
    "SOURCES": "xlnet_tf2.conversion.convert_config",
    "TARGETS": "xlnet_tf2.conversion.convert_config",
    "HeadOptions": "xlnet_tf2.conversion.convert",
    "TaskOptions": "xlnet_tf2.conversion.convert",
    "describe_report": "xlnet_tf2.conversion.convert",
    "fill": "xlnet_tf2.conversion.convert",
    "read_foreign": "xlnet_tf2.conversion.convert",
    "CheckpointReadError": "xlnet_tf2.conversion.readers",
    "read_huggingface_directory": "xlnet_tf2.conversion.readers",
    "read_original_checkpoint": "xlnet_tf2.conversion.readers",
    "save_huggingface": "xlnet_tf2.conversion.to_huggingface",
    "WeightMismatchError": "xlnet_tf2.conversion.weight_maps",
    "assign_weights": "xlnet_tf2.conversion.weight_maps",
    "huggingface_weight_map": "xlnet_tf2.conversion.weight_maps",
    "original_weight_map": "xlnet_tf2.conversion.weight_maps",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
