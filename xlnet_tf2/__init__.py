"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3.

Every public name is imported on first use, so `import xlnet_tf2` (and the command-line
helpers in xlnet_tf2.cli) do not import TensorFlow: a command can silence TensorFlow's start-up
before it happens, and `--help` stays fast.
"""

import importlib
import importlib.util

__version__ = "0.1.0"

_LAZY = {
    "ConfigError": "xlnet_tf2.config",
    "XLNetConfig": "xlnet_tf2.config",
    "load_pretrained": "xlnet_tf2.models.saving",
    "restore_weights": "xlnet_tf2.models.saving",
    "save_pretrained": "xlnet_tf2.models.saving",
    "XLNetLMHeadModel": "xlnet_tf2.models",
    "XLNetModel": "xlnet_tf2.models",
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "from_pretrained": "xlnet_tf2.hub",
    "generate": "xlnet_tf2.models.generation",
}

__all__ = ["ConfigError", "XLNetConfig", "XLNetLMHeadModel", "XLNetModel", "XLNetPreprocessor",
           "XLNetTokenizer", "__version__", "from_pretrained", "generate", "load_pretrained",
           "restore_weights", "save_pretrained"]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # xlnet_tf2.models etc.
    raise AttributeError(f"module 'xlnet_tf2' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
