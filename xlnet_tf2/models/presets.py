"""keras-hub's `from_preset(preset)` and `presets` for the models of this floor.

A preset is a directory or a name. Which ones a model can be built from depends on which
floors are loaded, so loaders register here rather than being imported (models/ may not
import conversion/ or hub.py, which sit above it):

  models/saving.py   this project's own directories (a saved or converted LM, a
                     pretraining model_dir)
  xlnet_tf2/hub.py   everything `xlnet_tf2.from_pretrained` takes: HuggingFace and original
                     release directories (converted on the fly), hub repository ids and the
                     release names of `presets()`, downloaded when not cached

HuggingFace's names on the models of this floor (`XLNetModel.from_pretrained`, the
`save_pretrained` methods, a task model's `from_pretrained`) are implemented in hub.py the
same way: it registers them here (`register_hub_functions`) and the models look them up by
name (`hub_function`).

`import xlnet_tf2` imports hub.py as soon as TensorFlow is loaded (xlnet_tf2/__init__.py), so
every loader is in place by the time a model exists to call from_preset on.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.locate import PRETRAINED, PretrainedNotFoundError

# (preset, run-time settings) -> an XLNetLMHeadModel, or None when the loader does not read
# that kind of preset. Tried newest first.
Loader = Callable[[str, dict], Optional[object]]
_LOADERS: List[Loader] = []


def register_loader(loader: Loader) -> None:
    if loader not in _LOADERS:
        _LOADERS.append(loader)


def load_lm_model(preset: str, **runtime):
    """An XLNetLMHeadModel with the weights of `preset` (see the module docstring)."""
    for loader in reversed(_LOADERS):
        model = loader(preset, runtime)
        if model is not None:
            return model
    raise PretrainedNotFoundError(
        f"{preset!r} is not a directory in this project's format, and the loader of "
        "HuggingFace/original directories and release names (xlnet_tf2.hub) is not imported: "
        "import xlnet_tf2.hub, or use xlnet_tf2.from_pretrained.")


# name -> hub.py's implementation: "load_backbone" (name_or_dir, **kwargs) -> XLNetModel,
# "load_task_model" (cls, name_or_dir, **kwargs) -> a task model of class cls,
# "save_pretrained" (model, output_dir, spm_model, **kwargs) -> what it wrote.
_HUB_FUNCTIONS: Dict[str, Callable] = {}


def register_hub_functions(**functions: Callable) -> None:
    _HUB_FUNCTIONS.update(functions)


def hub_function(name: str) -> Callable:
    """hub.py's implementation of `name` (see _HUB_FUNCTIONS)."""
    if name not in _HUB_FUNCTIONS:
        raise PretrainedNotFoundError(
            f"{name} is implemented in xlnet_tf2.hub, which is not imported: import xlnet_tf2 "
            "before TensorFlow, or import xlnet_tf2.hub.")
    return _HUB_FUNCTIONS[name]


class ClassProperty:
    """A read-only attribute computed on the class (keras-hub's `Model.presets`)."""

    def __init__(self, getter: Callable[[], object]):
        self.getter = getter

    def __get__(self, instance, owner):
        return self.getter()


def presets() -> Dict[str, dict]:
    """The release names from_preset knows, with their architecture and hub repository."""
    listing = {}
    for name, release in PRETRAINED.items():
        arch = XLNetConfig.preset(release.preset).architecture()
        listing[name] = {
            "description": (f"XLNet {release.preset}, cased: {arch['n_layer']} layers, width "
                            f"{arch['d_model']}, {arch['n_head']} heads, "
                            f"{arch['n_token']} SentencePiece pieces."),
            "repo_id": release.repo_id, "architecture": arch}
    return listing
