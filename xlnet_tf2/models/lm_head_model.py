"""XLNet with the tied language-model head used in pretraining."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models import generation
from xlnet_tf2.models import pretrained
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models.xlnet_model import KeywordInputs, XLNetModel


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetLMHeadModel(KeywordInputs, pretrained.PretrainedModel, keras.Model):
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

    kind = "lm"  # what the loaders and writers of models/pretrained.py see

    # transformers' name, and `xlnet_tf2.from_pretrained` (below): models/pretrained.py's
    # `load`, the one loader.
    from_pretrained = classmethod(pretrained.load)

    def call(self, inputs, training=None, output_hidden_states=False, plan=None):
        outputs = dict(self.transformer(inputs, training=training,
                                        output_hidden_states=output_hidden_states, plan=plan))
        # hidden [B, L or P, D] . word_embedding^T + lm_bias, float32 under every policy.
        hidden = outputs["hidden"]
        embedding = tf.cast(self.transformer.word_embedding.embeddings, hidden.dtype)
        logits = tf.einsum("bsd,vd->bsv", hidden, embedding)
        outputs["logits"] = tf.cast(logits, tf.float32) + tf.cast(self.lm_bias, tf.float32)
        return outputs

    def generate(self, input_ids, **kwargs):
        """Text generation with memory, greedy or sampled (models/generation.py)."""
        return generation.generate(self, input_ids, **kwargs)


# `xlnet_tf2.from_pretrained(name_or_dir, **kwargs)`: a ready XLNetLMHeadModel from a
# directory (ours, HuggingFace's or the original release's), a hub repository id or a release
# name, with run-time settings as keywords (mem_len=384, ...).
from_pretrained = XLNetLMHeadModel.from_pretrained
