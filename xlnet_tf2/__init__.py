"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3.

Every public name is imported on first use, so `import xlnet_tf2` (and the command-line
helpers in xlnet_tf2.cli) do not import TensorFlow: a command can silence TensorFlow's start-up
before it happens, and `--help` stays fast.

Once TensorFlow and Keras are imported (by anyone), the modules defining our Keras classes are
imported too (`_RegisterKerasClasses` below), so `keras.models.load_model` finds them in a
`.keras` file after `import xlnet_tf2` alone.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import threading
import warnings

__version__ = "0.1.0"

_LAZY = {
    "ConfigError": "xlnet_tf2.config",
    "XLNetConfig": "xlnet_tf2.config",
    "load_pretrained": "xlnet_tf2.models.lm_head_model",
    "restore_weights": "xlnet_tf2.models.pretrained",
    "save_pretrained": "xlnet_tf2.models.pretrained",
    "HeadModel": "xlnet_tf2.models",
    "XLNetLMHeadModel": "xlnet_tf2.models",
    "XLNetModel": "xlnet_tf2.models",
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "XLNetMultipleChoicePreprocessor": "xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor",
    "XLNetQuestionAnsweringPreprocessor":
        "xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor",
    "XLNetClassifier": "xlnet_tf2.models",
    "XLNetRegressor": "xlnet_tf2.models",
    "XLNetMultipleChoice": "xlnet_tf2.models",
    "XLNetQuestionAnswerer": "xlnet_tf2.models",
    "from_pretrained": "xlnet_tf2.models.lm_head_model",
    "generate": "xlnet_tf2.models.generation",
}

__all__ = ["ConfigError", "HeadModel", "XLNetClassifier", "XLNetConfig", "XLNetLMHeadModel",
           "XLNetModel",
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


# Importing it imports every module that registers a Keras class.
_KERAS_CLASSES = "xlnet_tf2.models"


class _RegisterKerasClasses(importlib.abc.MetaPathFinder):
    """Imports _KERAS_CLASSES at the first moment it is safe: once Keras is imported
    (TensorFlow imports it too) and none of keras, tensorflow or xlnet_tf2 is half imported.
    Keras finds a `.keras` file's classes in its registry of custom objects
    ("xlnet_tf2>XLNetClassifier"), which our modules fill when they are imported, and never
    imports a module that is not its own to find one; importing ours from inside one of those
    imports would run them against a partly initialized module (TensorFlow imports Keras half
    way through its own import).

    First on `sys.meta_path`, it adds a check after each watched module finishes loading
    (only the top of keras and tensorflow: their thousand submodules finish inside the
    package's own import); when Keras is already imported, the check runs at once. Once run,
    it removes itself."""

    WATCHED = ("keras", "tensorflow")

    def __init__(self):
        self.done = False
        self.lock = threading.RLock()

    @staticmethod
    def _initializing(name: str) -> bool:
        spec = getattr(sys.modules.get(name), "__spec__", None)
        return bool(getattr(spec, "_initializing", False))

    def _is_watched(self, name: str) -> bool:
        return name in self.WATCHED or name == __name__ or name.startswith(__name__ + ".")

    def find_spec(self, fullname, path=None, target=None):
        if self.done or not self._is_watched(fullname):
            return None
        for finder in sys.meta_path:
            spec = (None if finder is self or not hasattr(finder, "find_spec")
                    else finder.find_spec(fullname, path, target))
            if spec is not None:
                break
        else:
            return None
        exec_module = getattr(spec.loader, "exec_module", None)
        if exec_module is not None:
            def exec_then_check(module):
                exec_module(module)
                self.check(finishing=fullname)

            spec.loader.exec_module = exec_then_check  # this module's loader only
        return spec

    def check(self, finishing: str = "") -> None:
        with self.lock:
            if self.done or "keras" not in sys.modules:
                return
            names = list(self.WATCHED) + [n for n in list(sys.modules) if self._is_watched(n)]
            if any(n != finishing and self._initializing(n) for n in names):
                return
            self.done = True
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        try:
            importlib.import_module(_KERAS_CLASSES)
        except ImportError as e:
            warnings.warn(f"xlnet_tf2 could not register its Keras classes ({e}); "
                          "keras.models.load_model will not find them.", stacklevel=2)


_hook = _RegisterKerasClasses()
sys.meta_path.insert(0, _hook)
_hook.check(finishing=__name__)  # this package, finishing its import, is not half imported
