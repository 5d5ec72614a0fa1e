"""Names of a package imported on first use (PEP 562), so that importing the package (and its
light modules: settings, the Python tokenizer) does not import TensorFlow.

    _LAZY = {"convert_checkpoint": "xlnet_tf2.conversion.convert", ...}
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)

The package's own public names (xlnet_tf2/__init__.py) are such a table too, with its
submodules (`xlnet_tf2.models`) and the model classes the task declarations name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Callable, List, Mapping, Tuple


def lazy_names(package: str, names: Mapping[str, str], submodules: bool = False
               ) -> Tuple[Callable, Callable[[], List[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`, whose attribute `name` is
    `names[name]`'s attribute of that name, imported (and kept) on first use; with
    `submodules`, any other public name that is a submodule of `package` is that submodule
    (`xlnet_tf2.models`)."""

    def __getattr__(name):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        if submodules and not name.startswith("_") and \
                importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__

