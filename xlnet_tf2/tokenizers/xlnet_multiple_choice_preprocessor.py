"""`XLNetMultipleChoicePreprocessor`: (article, question, options) strings -> one sequence per
option, as RACE fine-tuning lays them out (xlnet_tf2/tasks/race.py), in the graph.

    preprocessor = XLNetMultipleChoicePreprocessor("spiece.model", seq_len=512)
    inputs = preprocessor({"article": articles, "question": questions, "options": options})
    # input_ids, segment_ids, attention_mask int32 [B, C, L]
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor

TEXT_KEYS = ("article", "question", "options")


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetMultipleChoicePreprocessor(XLNetPreprocessor):
    """article [B], question [B], options [B, C] strings -> input_ids, segment_ids,
    attention_mask int32 [B, C, L]: per option `article <sep> qa <sep> <cls>`, left padded,
    qa = the question with its blank "_" filled by the option (else question + " " + option),
    keeping its last max_qa_length tokens. Takes a dict with TEXT_KEYS or the three
    positionally; one unbatched element (scalars and [C] options) gives [C, L]."""

    def __init__(self, spm_model, seq_len: int, num_choices: int = 4, max_qa_length: int = 128,
                 lower: bool = False, **kwargs):
        kwargs.pop("layout", None)  # always the original's cls_last
        super().__init__(spm_model, seq_len, layout="cls_last", lower=lower, **kwargs)
        self.num_choices = num_choices
        self.max_qa_length = max_qa_length

    def get_config(self):
        config = super().get_config()
        del config["layout"]
        config.update(num_choices=self.num_choices, max_qa_length=self.max_qa_length)
        return config

    def call(self, article, question=None, options=None) -> Dict[str, tf.Tensor]:
        if isinstance(article, dict):
            article, question, options = (article[k] for k in TEXT_KEYS)
        elif isinstance(article, (tuple, list)) and question is None:
            article, question, options = article
        article = tf.convert_to_tensor(article, tf.string)
        question = tf.convert_to_tensor(question, tf.string)
        options = tf.ensure_shape(tf.convert_to_tensor(options, tf.string),
                                  [None] * (article.shape.rank or 0) + [self.num_choices])
        scalar = article.shape.rank == 0
        if scalar:
            article, question, options = article[None], question[None], options[None]
        batch, choices = tf.shape(article)[0], self.num_choices
        qa = in_graph_packing.multiple_choice_texts(question, options)          # [B*C]
        article_ids = self.encode_ids(tf.reshape(tf.repeat(article, choices), [-1]))
        flat = in_graph_packing.encode_multiple_choice(article_ids, self.encode_ids(qa),
                                                       self.seq_len, self.max_qa_length)
        inputs = {k: tf.reshape(v, [batch, choices, self.seq_len]) for k, v in flat.items()}
        if scalar:
            inputs = {k: v[0] for k, v in inputs.items()}
        return inputs
