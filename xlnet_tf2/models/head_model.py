"""`HeadModel`, the base of the models with a head: the XLNet backbone (attribute
`transformer`, so pretraining checkpoints and converted releases restore into it by the same
object path) plus one head. The inputs, Keras training and HuggingFace's names: `HeadModel`.
"""

from __future__ import annotations

from typing import Dict, Optional

import keras
import tensorflow as tf

from xlnet_tf2 import task_registry
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import pretrained
from xlnet_tf2.models.model_inputs import ModelInputError
from xlnet_tf2.models.xlnet_model import KeywordInputs, XLNetModel

# The token inputs of every task model; "token_type_ids" is HuggingFace's "segment_ids".
TOKEN_INPUTS = ("input_ids", "segment_ids", "token_type_ids", "attention_mask")

# The HeadModel subclasses a task declaration names (task_registry's `head_model`), by dotted
# name: filled as each class is defined (models/__init__.py imports every model module).
_DECLARED_CLASSES: Dict[str, type] = {}


def dotted_name(cls) -> str:
    """`cls`'s dotted name, as a task declaration names it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def head_model_class(kind: str) -> type:
    """The HeadModel subclass of models of `kind` (task.json's kind: its task's declaration's
    `head_model`); an undeclared kind, or one whose class no imported module defines, raises
    ValueError."""
    path = task_registry.declared(kind).head_model
    if path not in _DECLARED_CLASSES:
        raise ValueError(f"task {kind!r} declares head_model {path}, which no imported module "
                         "defines: import its module in xlnet_tf2/models/__init__.py.")
    return _DECLARED_CLASSES[path]


def token_inputs(inputs) -> Dict[str, tf.Tensor]:
    """The token inputs of `inputs` (a dict) in the backbone's names, with the attention mask
    every head reads (all ones when not given); segment ids stay under the name given."""
    if not isinstance(inputs, dict) or "input_ids" not in inputs:
        given = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ModelInputError(f"a task model takes a dict with input_ids (and segment_ids or "
                              f"token_type_ids, attention_mask), as the tokenizer returns; got "
                              f"{given}.")
    tokens = {k: tf.convert_to_tensor(inputs[k]) for k in TOKEN_INPUTS if k in inputs}
    if "attention_mask" not in tokens:
        tokens["attention_mask"] = tf.ones_like(tokens["input_ids"])
    return tokens


class HeadModel(KeywordInputs, keras.Model):
    """Shared plumbing: config echo, backbone call on the token inputs, the main output for
    compile's losses and metrics, HuggingFace's from_pretrained / save_pretrained.

    All inputs are batch-major dicts of int32 tensors with a static sequence length L (or the
    same entries as keywords, HuggingFace's `model(**batch)`):
      input_ids                          [B, L]
      segment_ids, or HuggingFace's name token_type_ids (what XLNetTokenizer returns)
                                         [B, L], optional (no segment information)
      attention_mask (1 = real token)    [B, L], optional (all ones: no padding)
    SQuAD adds p_mask (1 = cannot be in an answer) [B, L] and cls_index [B]; multiple choice
    takes [B, C, L] for each of the token inputs. A key the model does not read (`INPUT_KEYS`:
    a misspelt name, a tokenizer's special_tokens_mask, the original's input_mask) is refused
    in one line naming the valid keys (model_inputs.check_input_keys), as the backbone refuses
    it. The losses of each task are in xlnet_tf2/tasks/losses.py.

    As Keras models, the task models returning a dict of outputs train on their main output
    (`MAIN_OUTPUT`, the logits) when `compile(loss=..., metrics=[...])` is given plain labels:
    `model.compile("adam", loss, metrics=["accuracy"]); model.fit(tokenizer(texts), labels)`
    works as for a one-output model; a loss, metrics or labels keyed by output name
    (`loss={"logits": ...}`, `metrics={"logits": [...]}`, `fit(x, {"logits": labels})`) apply
    to those outputs alone.

    HuggingFace's names: `from_pretrained` (a task directory of ours or transformers' task
    directory with its head, or any model directory's backbone with a new head built from the
    constructor's arguments) and `save_pretrained` (our task directory or transformers'
    XLNetFor... directory), both in models/pretrained.py. A subclass says which of task.json's
    tasks it serves by being named in their declarations (xlnet_tf2/task_registry.py's
    `head_model`: `KINDS` is set from them when the class is defined, and `kind`, an
    instance's task, is the one of them unless the class says otherwise), how task.json's
    settings build it (`from_settings`) and what its task.json says (`task_settings`).
    """

    # The output compile's losses and metrics apply to when labels are not a dict (None: all).
    MAIN_OUTPUT: Optional[str] = "logits"
    # The input keys a call reads (a subclass adds its own).
    INPUT_KEYS: tuple = TOKEN_INPUTS
    # The kinds (task names) whose declaration names this class (set by __init_subclass__).
    KINDS: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        tasks = tuple(d.name for d in task_registry.declared_tasks()
                      if d.head_model == dotted_name(cls))
        if tasks:
            cls.KINDS = tasks
            _DECLARED_CLASSES[dotted_name(cls)] = cls

    @property
    def kind(self) -> str:
        """This model's kind (task.json's "kind"): the one kind of its class's `KINDS`."""
        if len(self.KINDS) != 1:
            raise NotImplementedError(f"{type(self).__name__} serves {self.KINDS or 'no task'}; "
                                      "a class serving several says an instance's kind itself.")
        return self.KINDS[0]

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = XLNetConfig.coerce(config)
        self.transformer = XLNetModel(self.config)

    def _backbone(self, inputs, training, plan=None):
        """The backbone's outputs on the token inputs (token_inputs(inputs)); `plan`: the
        step's (layers/step_plan.py)."""
        outputs = self.transformer(inputs, training=training, plan=plan)
        # mask_emb feeds only pretraining's query stream, which no task model runs: left
        # trainable, Keras' fit would warn on every step that no gradient reaches it
        # (fine-tuning leaves it out of its variables the same way, tasks/finetuning.py).
        self.transformer.mask_emb.trainable = False
        return outputs

    def dummy_inputs(self, seq_len: int, batch_size: int = 1) -> Dict[str, tf.Tensor]:
        ids = tf.fill([batch_size, seq_len], 5)
        return {"input_ids": ids, "segment_ids": tf.zeros_like(ids),
                "attention_mask": tf.ones_like(ids)}

    def build_weights(self):
        """Creates every weight (a call on a short dummy batch); returns the model."""
        self(self.dummy_inputs(self.dummy_length()), training=False)
        return self

    def dummy_length(self) -> int:
        return 8

    # ------------------------------------------------------------------ task.json
    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        """The model task.json `settings` describe, its weights built (fresh). On HeadModel
        itself: a model of the class its task's declaration names (head_model_class)."""
        if cls is not HeadModel:
            raise NotImplementedError(f"{cls.__name__} does not say how task.json builds it.")
        return head_model_class(settings.get("kind")).from_settings(config, settings,
                                                                    head_dropout)

    def task_settings(self, label_list=None, seq_len: Optional[int] = None) -> dict:
        """task.json of this model (saving.py's task directory format): `seq_len` default
        the original's for the task."""
        return {"kind": self.kind,
                "seq_len": seq_len or task_registry.declared(self.kind).default_seq_len,
                "layout": "cls_last"}

    # ------------------------------------------------------------------ compile's view
    def _compiled_view(self, y, y_pred):
        """(labels, outputs) as compile's losses and metrics see them: labels keyed by output
        name meet those outputs alone (the model's other outputs, e.g. hidden, have no
        label); plain labels meet the main output, keyed by its name when the loss was given
        as a dict keyed by output (`loss={"logits": ...}`)."""
        if not isinstance(y_pred, dict):
            return y, y_pred
        if isinstance(y, dict):
            return y, {k: y_pred[k] for k in y if k in y_pred}
        if not self.MAIN_OUTPUT:
            return y, y_pred
        main = y_pred[self.MAIN_OUTPUT]
        if isinstance(self.loss, dict):
            return {self.MAIN_OUTPUT: y}, {self.MAIN_OUTPUT: main}
        return y, main

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        y, y_pred = self._compiled_view(y, y_pred)
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y, y_pred = self._compiled_view(y, y_pred)
        return super().compute_metrics(x, y, y_pred, sample_weight)

    # ------------------------------------------------------------------ HuggingFace's names
    @classmethod
    def from_pretrained(cls, name_or_dir: str, **kwargs):
        """A task model of this class from `name_or_dir` (models/pretrained.py's `load`, the
        one loader):
          - our task directory (task.json: a fine-tuning run, a converted fine-tuned
            checkpoint, `save_pretrained` output) of this class's task, with its head (its
            `which` checkpoint: "best", the default, or "latest"); on HeadModel itself, a task
            directory of any task, as the model class its task declares;
          - transformers' directory (or hub id) of the matching XLNetFor... class, with its
            head;
          - any other model directory, hub id or release name: its backbone with a new head
            from the constructor's arguments in `kwargs` (num_outputs=..., ...).
        Also takes load_weights, cache_dir, revision, local_files_only, run-time settings
        (dropout=..., ...) and head_dropout."""
        return pretrained.load(cls, name_or_dir, **kwargs)

    def save_pretrained(self, output_dir: str, spm_model: Optional[str] = None, *,
                        format: str = "xlnet_tf2", label_list=None,  # noqa: A002 - HF's
                        seq_len: Optional[int] = None):
        """Writes this model for `from_pretrained`: our task directory (format="xlnet_tf2";
        task.json's seq_len is `seq_len`, default the original's for the task, its
        label_list `label_list`, default "0".."n-1") or transformers' XLNetFor... directory
        (format="huggingface", label_list as id2label); `spm_model` adds the SentencePiece
        model. See `xlnet_tf2.save_pretrained`."""
        return pretrained.save_pretrained(self, output_dir, spm_model, format=format,
                                          label_list=label_list, seq_len=seq_len)
