"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3.

Every public name is imported on first use (lazy_names.py), so `import xlnet_tf2` (and the
command-line helpers in xlnet_tf2.cli) do not import TensorFlow: a command can silence
TensorFlow's start-up before it happens, and `--help` stays fast. The names are the table
below and every model class a task declaration names (task_registry.py: `XLNetClassifier`,
`SequenceClassifier`, `XLNetTokenClassifier`, ...); the examples in the docstrings of the
modules defining them run in tests/test_docstring_examples.py.

Once TensorFlow and Keras are imported (by anyone), the modules defining our Keras classes are
imported too (`_RegisterKerasClasses` below), so `keras.models.load_model` finds them in a
`.keras` file after `import xlnet_tf2` alone.
"""

import importlib
import importlib.abc
import sys
import threading
import warnings

from xlnet_tf2 import task_registry
from xlnet_tf2.lazy_names import lazy_names

__version__ = "0.1.0"

# The public names besides the task models: name -> the module defining it.
_NAMES = {
    "ConfigError": "xlnet_tf2.config",
    "XLNetConfig": "xlnet_tf2.config",
    "load_pretrained": "xlnet_tf2.models.deprecated",
    "restore_weights": "xlnet_tf2.models.pretrained",
    "save_pretrained": "xlnet_tf2.models.pretrained",
    "HeadModel": "xlnet_tf2.models.head_model",
    "XLNetLMHeadModel": "xlnet_tf2.models.lm_head_model",
    "XLNetModel": "xlnet_tf2.models.xlnet_model",
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "XLNetMultipleChoicePreprocessor": "xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor",
    "XLNetQuestionAnsweringPreprocessor":
        "xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor",
    "XLNetWordPreprocessor": "xlnet_tf2.tokenizers.xlnet_word_preprocessor",
    "from_pretrained": "xlnet_tf2.models.lm_head_model",
    "generate": "xlnet_tf2.models.generation",
}
# ... and every model class a task declaration names (its model with a head and its
# keras-hub-style model: XLNetClassifier, SequenceClassifier, XLNetTokenClassifier, ...), so a
# task declared in xlnet_tf2/task_registry.py is public the day it is declared.
_LAZY = {**_NAMES, **task_registry.model_classes()}

__all__ = sorted(_LAZY) + ["__version__"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, submodules=True)  # submodules: models, ...


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
