"""`XLNetQuestionAnsweringPreprocessor`: (question, context) strings -> the first SQuAD window,
with the answer masks the head needs, in the graph (the layout of xlnet_tf2/tasks/squad_data.py
and of the SQuAD export's windows).

    preprocessor = XLNetQuestionAnsweringPreprocessor("spiece.model", seq_len=512)
    inputs = preprocessor({"question": questions, "context": contexts})
    # input_ids, segment_ids, attention_mask, p_mask int32 [B, L]; cls_index int32 [B]

Only the first window of each context is read (its first seq_len - 3 - len(question)
tokens); the SavedModel export (experiments/export_saved_model.py --task=squad) reads every
window of long contexts.
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor

TEXT_KEYS = ("question", "context")


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetQuestionAnsweringPreprocessor(XLNetPreprocessor):
    """question [B], context [B] strings (a dict with TEXT_KEYS, or positionally) ->
    `context <sep> question <sep> <cls>` right padded: input_ids, segment_ids, attention_mask,
    p_mask (1 = cannot be in the answer) int32 [B, L], cls_index int32 [B]. The question keeps
    its first max_query_length tokens. One unbatched element gives [L] and a scalar."""

    def __init__(self, spm_model, seq_len: int, max_query_length: int = 64,
                 lower: bool = False, **kwargs):
        kwargs.pop("layout", None)  # SQuAD's own layout
        super().__init__(spm_model, seq_len, layout="cls_last", lower=lower, **kwargs)
        if max_query_length + 4 > seq_len:
            raise ValueError(f"max_query_length={max_query_length} leaves no room for the "
                             f"context in seq_len={seq_len}.")
        self.max_query_length = max_query_length

    def get_config(self):
        config = super().get_config()
        del config["layout"]
        config["max_query_length"] = self.max_query_length
        return config

    def call(self, question, context=None) -> Dict[str, tf.Tensor]:
        if isinstance(question, dict):
            question, context = (question[k] for k in TEXT_KEYS)
        elif isinstance(question, (tuple, list)) and context is None:
            question, context = question
        question = tf.convert_to_tensor(question, tf.string)
        context = tf.convert_to_tensor(context, tf.string)
        scalar = question.shape.rank == 0
        if scalar:
            question, context = question[None], context[None]
        inputs = in_graph_packing.encode_squad(self.encode_ids(context),
                                               self.encode_ids(question), self.seq_len,
                                               self.max_query_length)
        extra = in_graph_packing.squad_answer_inputs(inputs["input_ids"], inputs["segment_ids"],
                                                     inputs["attention_mask"])
        inputs.update(p_mask=extra["p_mask"], cls_index=extra["cls_index"])
        if scalar:
            inputs = {k: v[0] for k, v in inputs.items()}
        return inputs
