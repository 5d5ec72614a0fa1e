"""Names of a package imported on first use (PEP 562), so that importing the package (and its
light modules: settings, the Python tokenizer) does not import TensorFlow.

    _LAZY = {"convert_checkpoint": "xlnet_tf2.conversion.convert", ...}
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, List, Mapping, Tuple


def lazy_names(package: str, names: Mapping[str, str]) -> Tuple[Callable, Callable[[], List[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`, whose attribute `name` is
    `names[name]`'s attribute of that name, imported (and kept) on first use."""

    def __getattr__(name):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
