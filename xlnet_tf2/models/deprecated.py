"""Public names kept for code written against earlier versions, each calling its successor
with a DeprecationWarning."""

import warnings

from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel, from_pretrained


def load_pretrained(directory: str, **runtime) -> XLNetLMHeadModel:
    """Deprecated: `xlnet_tf2.from_pretrained(directory, **runtime)`, which it calls."""
    warnings.warn("xlnet_tf2.load_pretrained is deprecated: use xlnet_tf2.from_pretrained "
                  "(the same model, from any directory, release name or hub id).",
                  DeprecationWarning, stacklevel=2)
    return from_pretrained(directory, **runtime)
