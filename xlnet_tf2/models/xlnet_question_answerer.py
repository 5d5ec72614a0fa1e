"""Extractive question answering (SQuAD 1.1/2.0): `SquadModel`, the backbone with the start /
end / answer-class head (HuggingFace's XLNetForQuestionAnswering, outputs differing in form
only), and the keras-hub-style `XLNetQuestionAnswerer` around it, which adds the preprocessor
(question and context strings in, xlnet_tf2/tokenizers/xlnet_question_answering_preprocessor.py)
and the original's loss. The head is models/heads/squad_head.py.

    qa = xlnet_tf2.XLNetQuestionAnswerer.from_preset("converted/base", seq_len=256)
    x = {"question": questions, "context": contexts}
    qa.fit(x, {"answer_start": char_offsets, "answer_text": answers}, epochs=2)
    out = qa.predict(x)   # start_top_index [E, k], end_top_index [E, k, e], cls_logits [E], ...

Labels are either raw answers, `{"answer_start": character offsets in the context,
"answer_text": answer strings ("" = no answer)}` (SQuAD's own fields; the preprocessor finds
their tokens), or token positions in the packed window (`context <sep> question <sep>
<cls>`: a context token's index is its position) `{"start_positions", "end_positions"}`,
plus `is_impossible` (1.0 = no answer) for SQuAD 2.0. An answer outside the window points at
the window's <cls> (cls_index), as fine-tuning does; raw answers always give is_impossible.
The preprocessor reads each context's first window only; experiments/export_saved_model.py
--kind=squad serves whole contexts.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.head_model import TOKEN_INPUTS, HeadModel, token_inputs
from xlnet_tf2.models.heads import SquadHead
from xlnet_tf2.models.model_with_preprocessor import (ModelWithPreprocessor, cast_token_inputs,
                                                      head_setting, resolve_config)
from xlnet_tf2.models.model_inputs import ModelInputError
from xlnet_tf2.tokenizers import in_graph_packing
from xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor import (
    XLNetQuestionAnsweringPreprocessor)

LABEL_KEYS = ("start_positions", "end_positions", "is_impossible")
ANSWER_KEYS = ("answer_start", "answer_text")


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SquadModel(HeadModel):
    """SQuAD 1.1/2.0; see `xlnet_tf2.models.heads.SquadHead` for the outputs (several
    logits, no one main output: compile's losses and metrics take labels keyed by output)."""

    MAIN_OUTPUT = None

    def __init__(self, config, start_n_top: int = 5, end_n_top: int = 5,
                 head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.head_dropout = head_dropout
        c = self.config
        self.head = SquadHead(c.d_model, start_n_top, end_n_top, dropout=head_dropout,
                              initializer_range=c.initializer_range, name="squad_head")

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        n_top = settings.get("n_best_size", 5)
        return cls(config, n_top, n_top, head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len=None) -> dict:
        if self.start_n_top != self.end_n_top:
            raise ValueError(f"start_n_top={self.start_n_top} and end_n_top={self.end_n_top} "
                             "differ; task.json keeps one beam width (n_best_size) for both.")
        return dict(super().task_settings(label_list, seq_len), n_best_size=self.start_n_top)

    def dummy_length(self) -> int:
        return max(8, self.start_n_top, self.end_n_top)  # the beam needs n_top positions

    def get_config(self):
        return {"config": self.config.to_dict(), "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "head_dropout": self.head_dropout, "name": self.name}

    def dummy_inputs(self, seq_len: int, batch_size: int = 1):
        inputs = super().dummy_inputs(seq_len, batch_size)
        inputs.update(p_mask=tf.zeros([batch_size, seq_len], tf.int32),
                      cls_index=tf.fill([batch_size], seq_len - 1))
        return inputs

    INPUT_KEYS = TOKEN_INPUTS + ("p_mask", "cls_index", "start_positions")

    def call(self, inputs, training=None, plan=None):
        missing = sorted({"p_mask", "cls_index"} - set(inputs if isinstance(inputs, dict) else ()))
        if missing:
            raise ModelInputError(f"SquadModel needs {missing} besides the token inputs: p_mask "
                                  "[B, L] (1 = not part of an answer) and cls_index [B] (where "
                                  "<cls> is), as the SQuAD features hold them.")
        hidden = self._backbone(token_inputs(inputs), training, plan)["hidden"]
        return self.head(hidden, inputs["p_mask"], inputs["cls_index"],
                         start_positions=inputs.get("start_positions"), training=training,
                         plan=plan)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetQuestionAnswerer(ModelWithPreprocessor):
    """SquadModel with a preprocessor: token dicts [B, L] (p_mask and cls_index derived from
    the ids when absent) -> the SQuAD head's dict (xlnet_tf2/models/heads/squad_head.py):
    with start_positions (training, evaluation) start_logits, end_logits, cls_logits; without
    (prediction) start_logits, start_top_log_probs / start_top_index [B, k],
    end_top_log_probs / end_top_index [B, k, e], cls_logits. The default loss is the
    original's: (start + end cross-entropy) / 2, plus half the answer-class binary
    cross-entropy when labels hold is_impossible."""

    CONFIG_KEYS = ("start_n_top", "end_n_top", "head_dropout")
    start_n_top = head_setting("start_n_top")
    end_n_top = head_setting("end_n_top")
    head_dropout = head_setting("head_dropout")

    def __init__(self, config, preprocessor=None, start_n_top: int = 5, end_n_top: int = 5,
                 head_dropout: float = 0.1, **kwargs):
        task_model = SquadModel(resolve_config(config), start_n_top, end_n_top,
                                head_dropout=head_dropout, name="squad")
        super().__init__(task_model, preprocessor, **kwargs)
        self._finish_init()

    def dummy_length(self) -> int:
        return max(8, self.start_n_top)

    def call(self, inputs, training=None):
        inputs = cast_token_inputs(inputs)
        if "p_mask" not in inputs or "cls_index" not in inputs:
            extra = in_graph_packing.squad_answer_inputs(
                inputs["input_ids"], inputs["segment_ids"], inputs["attention_mask"])
            inputs.setdefault("p_mask", extra["p_mask"])
            inputs.setdefault("cls_index", extra["cls_index"])
        return self.task_model(inputs, training=training)

    def default_loss(self):
        return None  # compute_loss

    def default_metrics(self):
        return None  # the loss alone (Keras would pair metrics with y's keys)

    def prepare_labels(self, x, inputs: dict, y):
        if y is None:
            return inputs, None
        if set(y) == set(ANSWER_KEYS):
            if isinstance(x, dict) and "input_ids" in x:
                raise ValueError(f"raw answers {ANSWER_KEYS} need raw question/context "
                                 "inputs; with token dicts give start_positions and "
                                 "end_positions.")
            context = x["context"] if isinstance(x, dict) else x[1]
            y = self.preprocessor.answer_labels(context, y["answer_start"], y["answer_text"],
                                                inputs)
        unknown = sorted(set(y) - set(LABEL_KEYS))
        if unknown:
            raise ValueError(f"SQuAD labels are {LABEL_KEYS} (or raw answers {ANSWER_KEYS}); "
                             f"got {unknown}.")
        y = {k: tf.cast(v, tf.float32 if k == "is_impossible" else tf.int32) for k, v in y.items()}
        return {**inputs, "start_positions": y["start_positions"]}, y

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.loss is not None:  # compiled with a loss of the user's
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        crossentropy = keras.losses.sparse_categorical_crossentropy
        loss = 0.5 * (crossentropy(y["start_positions"], y_pred["start_logits"], from_logits=True)
                      + crossentropy(y["end_positions"], y_pred["end_logits"], from_logits=True))
        if "is_impossible" in y:
            loss += 0.5 * keras.losses.binary_crossentropy(
                y["is_impossible"][:, None], y_pred["cls_logits"][:, None], from_logits=True)
        if sample_weight is not None:
            weight = tf.cast(sample_weight, loss.dtype)
            return tf.reduce_sum(loss * weight) / tf.maximum(tf.reduce_sum(weight), 1e-12)
        return tf.reduce_mean(loss)

    def task_settings(self) -> dict:
        settings = super().task_settings()
        settings["n_best_size"] = self.start_n_top
        if self.preprocessor is not None:
            settings["max_query_length"] = self.preprocessor.max_query_length
        return settings

    @classmethod
    def from_task_settings(cls, config, settings: dict, preprocessor, **overrides):
        n_top = settings.get("n_best_size", 5)
        return cls(config, preprocessor=preprocessor,
                   **{"start_n_top": n_top, "end_n_top": n_top, **overrides})

    @classmethod
    def make_preprocessor(cls, spm_model: str, settings: dict):
        return XLNetQuestionAnsweringPreprocessor(
            spm_model, settings["seq_len"], max_query_length=settings.get("max_query_length", 64),
            lower=settings.get("lower", False))
