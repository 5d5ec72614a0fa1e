"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3."""

import importlib

from xlnet_tf2.config import ConfigError, XLNetConfig
from xlnet_tf2.conversion import load_pretrained, restore_weights, save_pretrained
from xlnet_tf2.models import XLNetLMHeadModel, XLNetModel

__version__ = "0.1.0"

# Imported on first use: the tokenizers load tensorflow-text, generation and the hub loader
# are not needed to build or train a model.
_LAZY = {
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "from_pretrained": "xlnet_tf2.hub",
    "generate": "xlnet_tf2.generation",
}

__all__ = ["ConfigError", "XLNetConfig", "XLNetLMHeadModel", "XLNetModel", "XLNetPreprocessor",
           "XLNetTokenizer", "__version__", "from_pretrained", "generate", "load_pretrained",
           "restore_weights", "save_pretrained"]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xlnet_tf2' has no attribute {name!r}")
