"""`XLNetPreprocessor`: raw strings -> model inputs as a Keras layer, on the in-graph
SentencePiece op (xlnet_tf2/tokenizers/in_graph_tokenizer.py), so the same layer runs in a
`tf.data` pipeline, inside a Keras model and inside an exported SavedModel (TF Serving needs
only TensorFlow and tensorflow-text). Its ids and layout are exactly those of the offline
tokenizer (`XLNetTokenizer`, xlnet_tf2/tokenizers/packing.py); a test compares them on real
text.

    preprocessor = XLNetPreprocessor("spiece.model", seq_len=128)
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(32).map(preprocessor)
    inputs = preprocessor(tf.constant(["a text"]), tf.constant(["its pair"]))
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf2.tokenizers.packing import LAYOUTS


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetPreprocessor(keras.layers.Layer):
    """Strings [B] (and their pairs [B]) -> input_ids, segment_ids, attention_mask int32 [B, L].

    Args:
      spm_model: path of the SentencePiece `.model` file; exported SavedModels ship it as an
        asset.
      seq_len: L, special tokens included. Over-long inputs are cut as in fine-tuning (a pair
        loses tokens from the end of the longer text; a single text keeps its first L - 2).
      layout: "cls_last" (XLNet's `A <sep> B <sep> <cls>`, left padded) or "cls_first".
      lower: lowercase after normalization (uncased models only).
    A scalar string (one tf.data element) gives [L] outputs.
    """

    def __init__(self, spm_model: str, seq_len: int, layout: str = "cls_last",
                 lower: bool = False, **kwargs):
        super().__init__(**kwargs)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        if seq_len < 3:
            raise ValueError(f"seq_len must be at least 3, got {seq_len}.")
        self.spm_model = spm_model
        self.seq_len = seq_len
        self.layout = layout
        self.lower = lower
        self.tokenizer = InGraphTokenizer(spm_model, lower=lower)
        # Strings are not float inputs: no conversion or autocasting of the arguments.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(spm_model=self.spm_model, seq_len=self.seq_len, layout=self.layout,
                      lower=self.lower)
        return config

    def call(self, text, text_b=None) -> Dict[str, tf.Tensor]:
        if isinstance(text, (tuple, list)) and text_b is None and len(text) == 2:
            text, text_b = text  # a (text, pair) element of a tf.data dataset
        text = tf.convert_to_tensor(text, tf.string)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[None]
        ids_b = None
        if text_b is not None:
            text_b = tf.convert_to_tensor(text_b, tf.string)
            ids_b = self.tokenizer.encode_ids(text_b[None] if scalar else text_b)
        inputs = in_graph_packing.encode_sequence_pair(self.tokenizer.encode_ids(text), ids_b,
                                                     self.seq_len, self.layout)
        if scalar:
            inputs = {k: v[0] for k, v in inputs.items()}
        return inputs
