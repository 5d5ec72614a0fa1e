"""XLNet models: the backbone and its heads."""

from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel
from xlnet_tf2.models.xlnet_model import XLNetModel

__all__ = ["XLNetLMHeadModel", "XLNetModel"]
