"""XLNet with the tied language-model head used in pretraining."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models import generation
from xlnet_tf2.models import presets as preset_registry
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models.xlnet_model import KeywordInputs, XLNetModel


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetLMHeadModel(KeywordInputs, keras.Model):
    """Backbone plus logits = hidden . word_embedding^T + lm_bias (weights tied).

    Call as `XLNetModel`; the returned dict adds `logits`, float32 [B, P or L, n_token]
    under every precision policy.
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "xlnet_lm")
        super().__init__(**kwargs)
        self.config = XLNetConfig.coerce(config)
        self.transformer = XLNetModel(self.config)

    def build(self, input_shape=None):
        self.transformer.build()
        self.lm_bias = self.add_weight(name="lm_bias", shape=(self.config.n_token,),
                                       initializer="zeros")
        self.built = True

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    presets = preset_registry.ClassProperty(preset_registry.presets)

    @classmethod
    def from_preset(cls, preset: str, **runtime) -> "XLNetLMHeadModel":
        """keras-hub's constructor from a preset: one of `XLNetLMHeadModel.presets`, a hub
        repository id, or a directory (ours, HuggingFace's or the original release's);
        `runtime` sets run-time fields (mem_len=..., dropout=...). See models/presets.py."""
        return preset_registry.load_lm_model(preset, **runtime)

    @classmethod
    def from_pretrained(cls, name_or_dir: str, **kwargs) -> "XLNetLMHeadModel":
        """transformers' name: `xlnet_tf2.from_pretrained(name_or_dir, **kwargs)` (hub.py)."""
        return preset_registry.hub_function("load_lm")(name_or_dir, **kwargs)

    def save_pretrained(self, output_dir: str, spm_model=None, *,
                        format: str = "xlnet_tf2"):  # noqa: A002 - HF's keyword
        """Writes this model for `from_pretrained`: our directory (format="xlnet_tf2") or
        transformers' XLNetLMHeadModel directory (format="huggingface"); `spm_model` adds
        the SentencePiece model. See `xlnet_tf2.save_pretrained`."""
        return preset_registry.hub_function("save_pretrained")(self, output_dir, spm_model,
                                                               format=format)

    def call(self, inputs, training=None, output_hidden_states=False):
        outputs = dict(self.transformer(inputs, training=training,
                                        output_hidden_states=output_hidden_states))
        outputs["logits"] = self.lm_logits(outputs["hidden"])
        return outputs

    def generate(self, input_ids, **kwargs):
        """Text generation with memory: `xlnet_tf2.models.generation.generate(self, input_ids, ...)`
        (greedy, or do_sample with temperature / top_k / top_p); returns int32 [B, P + n]."""
        return generation.generate(self, input_ids, **kwargs)

    def lm_logits(self, hidden):
        """hidden [B, L, D] -> float32 logits [B, L, n_token]."""
        embedding = tf.cast(self.transformer.word_embedding.embeddings, hidden.dtype)
        logits = tf.einsum("bsd,vd->bsv", hidden, embedding)
        return tf.cast(logits, tf.float32) + tf.cast(self.lm_bias, tf.float32)
