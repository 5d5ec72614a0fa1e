"""`XLNetPreprocessor`: raw strings -> model inputs as a Keras layer, on the in-graph
SentencePiece op (xlnet_tf2/tokenizers/in_graph_tokenizer.py), so the same layer runs in a
`tf.data` pipeline, inside a Keras model and inside an exported SavedModel (TF Serving needs
only TensorFlow and tensorflow-text). Its ids and layout are exactly those of the offline
tokenizer (`XLNetTokenizer`, xlnet_tf2/tokenizers/packing.py); a test compares them on real
text.

    preprocessor = XLNetPreprocessor("spiece.model", seq_len=128)
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(32).map(preprocessor)
    inputs = preprocessor(tf.constant(["a text"]), tf.constant(["its pair"]))

The SentencePiece model travels with the layer: a `.keras` file stores its bytes as an asset
(`save_assets` / `load_assets`), so the file can move to a machine without the original
`spiece.model`. The config keeps the path only as a hint: when it does not exist at load time
the asset supplies the model. This holds for any model holding the layer: a functional model
(`keras.Model(text_input, backbone(preprocessor(text_input)))`) rebuilds its graph from the
config before Keras hands the layers their assets, asking the layer only for its output
shapes, which it gives without a SentencePiece model (`compute_output_spec`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Dict, Optional, Union

import keras
import tensorflow as tf

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf2.tokenizers.packing import LAYOUTS


def _model_file(model_bytes: bytes) -> str:
    """A local file holding `model_bytes`, named by their hash (SavedModel export ships the
    tokenizer's model as an asset, which needs a file)."""
    digest = hashlib.sha256(model_bytes).hexdigest()[:20]
    path = os.path.join(tempfile.gettempdir(), "xlnet_tf2_spm", f"{digest}.model")
    if not os.path.exists(path):
        fileio.makedirs(os.path.dirname(path))
        fileio.write_atomically(path, model_bytes)
    return path


class PreprocessorError(ValueError):
    """A preprocessor that cannot run (no SentencePiece model). Raised inside `call`, whose
    errors Keras re-raises wrapped in "Exception encountered when calling ..." and a dump of
    the arguments unless the error says it was wrapped already: this one says so, so the
    message reaches the user as one line."""

    _keras_call_info_injected = True


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetPreprocessor(keras.layers.Layer):
    """Strings [B] (and their pairs [B]) -> input_ids, segment_ids, attention_mask int32 [B, L].

    Args:
      spm_model: the SentencePiece `.model` file (a path, or its bytes); exported SavedModels
        ship it as an asset, `.keras` files carry its bytes.
      seq_len: L, special tokens included. Over-long inputs are cut as in fine-tuning (a pair
        loses tokens from the end of the longer text; a single text keeps its first L - 2).
      layout: "cls_last" (XLNet's `A <sep> B <sep> <cls>`, left padded) or "cls_first".
      lower: lowercase after normalization (uncased models only).
    A scalar string (one tf.data element) gives [L] outputs.
    """

    def __init__(self, spm_model: Union[str, bytes, None], seq_len: int,
                 layout: str = "cls_last", lower: bool = False, **kwargs):
        super().__init__(**kwargs)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        if seq_len < 3:
            raise ValueError(f"seq_len must be at least 3, got {seq_len}.")
        self.seq_len = seq_len
        self.layout = layout
        self.lower = lower
        self.spm_model: Optional[str] = None
        self.tokenizer: Optional[InGraphTokenizer] = None
        self._missing_model = "none was given"
        self._shapes_only = False  # compute_output_spec without a model (see there)
        if spm_model is not None:
            self.set_spm_model(spm_model)
        # Strings are not float inputs: no conversion or autocasting of the arguments.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def set_spm_model(self, spm_model: Union[str, bytes]) -> None:
        """Uses the SentencePiece model `spm_model` (a path or the model's bytes)."""
        if isinstance(spm_model, bytes):
            spm_model = _model_file(spm_model)
        elif not tf.io.gfile.exists(spm_model):
            raise FileNotFoundError(f"SentencePiece model {spm_model!r} does not exist.")
        self.spm_model = spm_model
        self.tokenizer = InGraphTokenizer(spm_model, lower=self.lower)

    @property
    def model_bytes(self) -> bytes:
        """The SentencePiece model's bytes."""
        return self._require_tokenizer().model_bytes

    def _require_tokenizer(self) -> InGraphTokenizer:
        if self.tokenizer is None:
            raise PreprocessorError(
                f"{type(self).__name__} {self.name!r} has no SentencePiece model "
                f"({self._missing_model}): pass spm_model, or load the layer from a .keras "
                "file, which carries it.")
        return self.tokenizer

    # ------------------------------------------------------------------ Keras saving
    def get_config(self):
        config = super().get_config()
        config.update(spm_model=self.spm_model, seq_len=self.seq_len, layout=self.layout,
                      lower=self.lower)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        path = config.get("spm_model")
        if path and not tf.io.gfile.exists(path):
            # A .keras file from elsewhere: load_assets supplies the model from the file.
            config["spm_model"] = None
            layer = cls(**config)
            layer._missing_model = f"{path} does not exist here"
            return layer
        return cls(**config)

    def save_assets(self, dir_path):
        fileio.write_atomically(os.path.join(dir_path, run_dir.SPM_FILE), self.model_bytes)

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, run_dir.SPM_FILE), "rb") as f:
            self.set_spm_model(f.read())

    def compute_output_spec(self, *args, **kwargs):
        # Keras rebuilds a functional model from its config, calling every layer on symbolic
        # inputs, before load_assets gives this layer the SentencePiece model of a .keras
        # file whose spm_model path is gone. Output shapes and dtypes do not depend on the
        # pieces, so the call is traced with every text encoded as no ids.
        if self.tokenizer is not None:
            return super().compute_output_spec(*args, **kwargs)
        self._shapes_only = True
        try:
            return super().compute_output_spec(*args, **kwargs)
        finally:
            self._shapes_only = False

    # ------------------------------------------------------------------ encoding
    def encode_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids [B, (T)] int32 of strings [B]."""
        if self.tokenizer is None and self._shapes_only:
            texts = tf.convert_to_tensor(texts, tf.string)
            return tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], tf.int32), tf.zeros(tf.shape(texts)[:1], tf.int64))
        return self._require_tokenizer().encode_ids(texts)

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
            ids_b = self.encode_ids(text_b[None] if scalar else text_b)
        inputs = in_graph_packing.encode_sequence_pair(self.encode_ids(text), ids_b,
                                                       self.seq_len, self.layout)
        if scalar:
            inputs = {k: v[0] for k, v in inputs.items()}
        return inputs
