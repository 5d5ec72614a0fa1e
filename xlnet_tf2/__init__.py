"""xlnet-tf2: XLNet for TensorFlow 2 / Keras 3."""

from xlnet_tf2.config import ConfigError, XLNetConfig
from xlnet_tf2.conversion import load_pretrained, restore_weights, save_pretrained
from xlnet_tf2.models import XLNetLMHeadModel, XLNetModel

__version__ = "0.1.0"

__all__ = ["ConfigError", "XLNetConfig", "XLNetLMHeadModel", "XLNetModel", "__version__",
           "load_pretrained", "restore_weights", "save_pretrained"]
