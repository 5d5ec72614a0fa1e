"""Running code once other modules are imported, without importing them.

`import xlnet_tf2` must not import TensorFlow (command lines silence its start-up first, the
Python tokenizer never needs it), yet `keras.models.load_model` must find our classes in a
`.keras` file after `import xlnet_tf2` alone: Keras looks them up in its registry of custom
objects ("xlnet_tf2>XLNetClassifier"), which our modules fill when they are imported, and
never imports a module that is not its own to find one. So xlnet_tf2/__init__.py asks to
import the modules that register, and this module does it at the first moment it is safe:

  - Keras is imported (TensorFlow imports it too), and
  - none of the watched modules (the keras and tensorflow packages, xlnet_tf2 and its
    submodules) is half imported: registering from inside one of those imports would import
    our modules against a partly initialized TensorFlow, Keras or xlnet_tf2 module
    (TensorFlow imports Keras half way through its own import).

A finder first on `sys.meta_path` adds a check after each watched module finishes loading;
when Keras is already imported, the check runs at once. Once run, the finder removes itself.
Only the top of keras and tensorflow is watched: their thousand submodules finish inside the
package's own import.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import warnings
from typing import Callable, Sequence


def _initializing(name: str) -> bool:
    """Whether module `name` is in the middle of its import (CPython marks its spec)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `callback` once `trigger` is imported and no watched module is half imported."""

    def __init__(self, trigger: str, modules: Sequence[str], trees: Sequence[str],
                 callback: Callable[[], None]):
        self.trigger = trigger
        self.modules = tuple(modules)      # watched by exact name
        self.trees = tuple(trees)          # watched with every submodule
        self.callback = callback
        self.done = False
        self.lock = threading.RLock()

    def _is_watched(self, name: str) -> bool:
        return (name in self.modules or name in self.trees
                or name.startswith(tuple(t + "." for t in self.trees)))

    def find_spec(self, fullname, path=None, target=None):
        if self.done or not self._is_watched(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None and hasattr(loader, "exec_module"):
            exec_module = loader.exec_module

            def exec_then_check(module):
                exec_module(module)
                self.check(finishing=fullname)

            loader.exec_module = exec_then_check  # this module's loader only
        return spec

    def check(self, finishing: str = "") -> None:
        with self.lock:
            if self.done or self.trigger not in sys.modules:
                return
            names = list(self.modules) + [n for n in list(sys.modules) if self._is_watched(n)]
            busy = [n for n in names if n != finishing and _initializing(n)]
            if busy:
                return
            self.done = True
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        try:
            self.callback()
        except ImportError as e:
            warnings.warn(f"xlnet_tf2 could not register its Keras classes ({e}); "
                          "keras.models.load_model will not find them.", stacklevel=2)


def after_import(trigger: str, modules: Sequence[str], trees: Sequence[str],
                 callback: Callable[[], None], caller: str = "") -> None:
    """Calls `callback()` once module `trigger` is imported and none of the watched modules
    (`modules` by name, `trees` with their submodules) is half imported: now if that already
    holds, else when it first does. `caller`, the package calling this as the last thing it
    does, does not count as half imported."""
    hook = _AfterImport(trigger, modules, trees, callback)
    sys.meta_path.insert(0, hook)
    hook.check(finishing=caller)
