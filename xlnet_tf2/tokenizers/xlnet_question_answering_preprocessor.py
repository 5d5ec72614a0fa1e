"""`XLNetQuestionAnsweringPreprocessor`: (question, context) strings -> the first SQuAD window,
with the answer masks the head needs, in the graph (the layout of xlnet_tf2/tasks/squad_data.py
and of the SQuAD export's windows).

    preprocessor = XLNetQuestionAnsweringPreprocessor("spiece.model", seq_len=512)
    inputs = preprocessor({"question": questions, "context": contexts})
    # input_ids, segment_ids, attention_mask, p_mask int32 [B, L]; cls_index int32 [B]

Training labels from raw answers (SQuAD's `answer_start` character offset and `text`):
`answer_labels` gives the token positions the fine-tuning data gives (squad_data.py).

Only the first window of each context is read (its first seq_len - 3 - len(question)
tokens); the SavedModel export (experiments/export_saved_model.py --kind=squad) reads every
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

    def answer_labels(self, context, answer_start, answer_text,
                      inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """start_positions, end_positions int32 [B] and is_impossible float32 [B] of raw
        answers in the windows `inputs` (this layer's output for `context`): answer_start is
        the answer's first character in the raw context (code points, as Python indexes
        str), answer_text its text ("" for no answer). An answer outside the window points
        at its <cls> with is_impossible 1, as in fine-tuning."""
        context = tf.convert_to_tensor(context, tf.string)
        answer_text = tf.convert_to_tensor(answer_text, tf.string)
        scalar = context.shape.rank == 0
        if scalar:
            context, answer_text = context[None], answer_text[None]
            answer_start = tf.reshape(answer_start, [1])
            inputs = {k: v[None] for k, v in inputs.items()}
        _, char_start, char_end = self._require_tokenizer().encode_ids_with_char_spans(context)
        answer_start = tf.cast(answer_start, tf.int64)
        answer_end = answer_start + tf.cast(tf.strings.length(answer_text, unit="UTF8_CHAR"),
                                            tf.int64)
        doc_length = in_graph_packing.squad_answer_inputs(
            inputs["input_ids"], inputs["segment_ids"], inputs["attention_mask"])["doc_length"]
        labels = in_graph_packing.answer_positions(char_start, char_end, answer_start,
                                                   answer_end, doc_length, inputs["cls_index"])
        if scalar:
            labels = {k: v[0] for k, v in labels.items()}
        return labels
