"""What a model refuses before anything is computed, each in one line (`ModelInputError`): an
input key it does not read (`check_input_keys`, every model's and ModelWithPreprocessor's) and,
in an eager call, a token id outside its vocabulary (`eager_token_ids`; a traced call asserts
them: xlnet_model.py's `check_token_ids`); and `model_inputs`, the entries of a task's
features a model reads."""

from __future__ import annotations

import numpy as np


class ModelInputError(ValueError):
    """Inputs the model cannot take (ids outside the vocabulary, unknown keys, wrong shapes).
    Keras re-raises an error from `call` wrapped in "Exception encountered when calling ..."
    and every argument, per enclosing layer, unless the error says the wrapping was done: this
    class says so (the attribute Keras reads), so the user reads the one line written here."""

    _keras_call_info_injected = True


# Input keys of other projects with another meaning, and what to give instead.
_FOREIGN_KEYS = {"input_mask": "the original XLNet's padding mask, 1 = padding: give "
                               "attention_mask = 1 - input_mask"}


def check_input_keys(model_name: str, inputs, valid) -> None:
    """Every model's inputs: a dict key the model does not read (a misspelt name, another
    project's input_mask) is a ModelInputError naming the valid keys, before any computation
    (ignored, the model would compute without what the caller meant: a padding mask)."""
    if not isinstance(inputs, dict):
        return
    unknown = sorted(set(inputs) - set(valid))
    if unknown:
        hints = "".join(f" ({k}: {_FOREIGN_KEYS[k]})" for k in unknown if k in _FOREIGN_KEYS)
        raise ModelInputError(f"{model_name} got unknown input key(s) {unknown}{hints}; valid "
                              f"keys: {tuple(valid)}.")


def eager_token_ids(input_ids, n_token: int, name: str = "input_ids"):
    """`input_ids` (eager) if every id is in [0, n_token), else a ModelInputError with the
    first bad position."""
    values = np.asarray(input_ids)
    bad = (values < 0) | (values >= n_token)
    if bad.any():
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ModelInputError(
            f"{name}{list(position)} = {int(values[position])} is outside the vocabulary "
            f"[0, {n_token}) of this model (n_token={n_token}); ids come from the model's own "
            "SentencePiece model.")
    return input_ids


def model_inputs(model, features) -> dict:
    """The entries of `features` (a task's, labels beside) that `model` reads (INPUT_KEYS)."""
    return {k: v for k, v in features.items() if k in model.INPUT_KEYS}
