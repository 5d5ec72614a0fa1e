"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3.

Every public name is imported on first use, so `import xlnet_tf2` (and the command-line
helpers in xlnet_tf2.cli) do not import TensorFlow: a command can silence TensorFlow's start-up
before it happens, and `--help` stays fast.

Once TensorFlow and Keras are imported (by anyone), the modules defining our Keras classes are
imported too (import_hooks.py), so `keras.models.load_model` finds them in a `.keras` file
after `import xlnet_tf2` alone, and `from_preset` knows every kind of preset.
"""

import importlib
import importlib.util

from xlnet_tf2 import import_hooks

__version__ = "0.1.0"

_LAZY = {
    "ConfigError": "xlnet_tf2.config",
    "XLNetConfig": "xlnet_tf2.config",
    "load_pretrained": "xlnet_tf2.models.saving",
    "restore_weights": "xlnet_tf2.models.saving",
    "save_pretrained": "xlnet_tf2.hub",
    "XLNetLMHeadModel": "xlnet_tf2.models",
    "XLNetModel": "xlnet_tf2.models",
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "XLNetMultipleChoicePreprocessor": "xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor",
    "XLNetQuestionAnsweringPreprocessor":
        "xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor",
    "XLNetClassifier": "xlnet_tf2.keras_tasks",
    "XLNetRegressor": "xlnet_tf2.keras_tasks",
    "XLNetMultipleChoice": "xlnet_tf2.keras_tasks",
    "XLNetQuestionAnswerer": "xlnet_tf2.keras_tasks",
    "from_pretrained": "xlnet_tf2.hub",
    "generate": "xlnet_tf2.models.generation",
}
# Importing it imports every module that registers a Keras class or a preset loader.
_KERAS_REGISTRY = "xlnet_tf2.keras_tasks"

__all__ = ["ConfigError", "XLNetClassifier", "XLNetConfig", "XLNetLMHeadModel", "XLNetModel",
           "XLNetMultipleChoice", "XLNetMultipleChoicePreprocessor", "XLNetPreprocessor",
           "XLNetQuestionAnswerer", "XLNetQuestionAnsweringPreprocessor", "XLNetRegressor",
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


import_hooks.after_import("keras", modules=("keras", "tensorflow"), trees=(__name__,),
                          callback=lambda: importlib.import_module(_KERAS_REGISTRY),
                          caller=__name__)
