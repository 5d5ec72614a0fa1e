"""The fine-tuning tasks, each declared once: `TaskDeclaration` says what a task is called (the
kind of model it trains: task.json's `kind`), which classes and functions of the floors above
serve it (by their dotted names), its defaults and its HuggingFace counterpart. Every table of
tasks derives from the declarations registered here:

  run_dir.TASKS                    what task.json's kind (and xlnet-convert's --kind) may say
  tasks/head_spec.HeadSpec         task.json's keys: the shared ones and each task's `settings`
  conversion/convert_config        DEFAULT_SEQ_LEN, --kind's choices
  conversion/to_huggingface        ARCHITECTURES
  models/head_model, models/model_with_preprocessor
                                   each model class's kind(s) (`KINDS`, `kind`, `KIND`), read
                                   from the declaration that names the class
  export/export_config             EXPORT_KINDS (the declared tasks and "features")
  export/saved_model.signatures_of each task's SavedModel signatures (`serving`)
  xlnet_tf2/__init__.py            the package's public names: every declared model class
                                   (`model_classes`)

This module is on the lowest floor, so every floor reads it; it names the classes of the
floors above as strings and imports none of them. Each floor attaches its own part when its
module defines it: a `HeadModel` or `ModelWithPreprocessor` subclass whose dotted name a
declaration gives learns its kind at class creation, an export function marked
`serving_tasks.signature_builder` is found by its dotted name. A declared name no module
defines fails with one line naming the declaration (tests/test_architecture_claims.py checks
every name of every declaration).

Adding a task: its own modules (docs/ARCHITECTURE.md, "Where a new fine-tuning task goes") and
one `register(TaskDeclaration(...))` below.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Dict, Mapping, Optional, Tuple, Union

from xlnet_tf2 import config_flags

# task.json's keys every task has (tasks/head_spec.py): name -> (type, default). `kind` and
# `seq_len` are required.
SHARED_SETTINGS: Dict[str, tuple] = {
    "kind": (str, dataclasses.MISSING),
    "seq_len": (int, dataclasses.MISSING),
    "summary_type": (str, "last"),
    "layout": (str, "cls_last"),
    "label_list": ((list, tuple), None),
    "lower": (bool, False),
}


# task.json's keys that were renamed: old name -> name. Files written before still read
# (`current_settings`).
RENAMED_SETTINGS: Dict[str, str] = {"task": "kind"}


def current_settings(values: Mapping[str, object], source: str) -> Dict[str, object]:
    """task.json's settings `values` (read from `source`) under today's key names: a key of
    RENAMED_SETTINGS is read as its new name, with one DeprecationWarning naming the file. Both
    names with different values raise RunConfigError (a ValueError) naming the file."""
    out = dict(values)
    try:
        found = config_flags.take_old_names(out, RENAMED_SETTINGS)
    except config_flags.RunConfigError as e:
        raise config_flags.RunConfigError(f"{source}: {e}") from None
    for old in found:
        new = RENAMED_SETTINGS[old]
        warnings.warn(f"{source}: the key {old!r} is now {new!r} (read as it); the file "
                      "was written by an earlier version.", DeprecationWarning, stacklevel=3)
    return out


@dataclasses.dataclass(frozen=True)
class TaskSetting:
    """A key of task.json only some tasks have (race's num_choices, squad's doc_stride, ...):
    its type (what task.json may hold), default and meaning; `positive`: task.json must hold a
    value above 0."""

    name: str
    type: Union[type, Tuple[type, ...]]
    default: object
    help: str
    positive: bool = False


@dataclasses.dataclass(frozen=True)
class TaskDeclaration:
    """One fine-tuning task, everything the library's tables say of it.

    name: the task's name, which is also the kind of model it trains: task.json's "kind" (and
      xlnet-convert's and xlnet-export's --kind).
    head_model: the dotted name of the `HeadModel` subclass (models/) that serves it: the
      backbone with its head, its HuggingFace weight map (`huggingface_head_map`, or
      conversion/head_maps.py's for the summary heads).
    keras_hub_model: the dotted name of its keras-hub-style `ModelWithPreprocessor`.
    finetune_task: the dotted name of its `FinetuneTask` subclass (tasks/): the data reader,
      loss and metrics of fine-tuning.
    command: the console script that fine-tunes it (pyproject.toml's [project.scripts]).
    serving: the dotted name of the function (export/, marked
      `serving_tasks.signature_builder`) that builds its SavedModel signatures.
    default_seq_len: task.json's seq_len when none is given (the original's max_seq_length of
      the task's runner).
    huggingface_architecture: transformers' class of the task (config.json `architectures`).
    settings: task.json's keys of this task beyond SHARED_SETTINGS.
    min_labels: the fewest names a label_list may hold (0: the task has no label_list).
    summary: whether the head reads a sequence summary (task.json's summary_type, HuggingFace's
      summary_* config keys).
    original_release: whether the original zihangdai/xlnet release fine-tunes this head (a
      checkpoint of it converts with --source=original).
    huggingface_label_tensor: for a head read from HuggingFace with its labels alone (no
      summary, no task-specific conversion), the tensor whose first axis counts them.
    """

    name: str
    head_model: str
    keras_hub_model: str
    finetune_task: str
    command: str
    serving: str
    default_seq_len: int
    huggingface_architecture: str
    settings: Tuple[TaskSetting, ...] = ()
    min_labels: int = 0
    summary: bool = False
    original_release: bool = True
    huggingface_label_tensor: Optional[str] = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"a task's name is an identifier (task.json's \"kind\"), got "
                             f"{self.name!r}.")
        for field in ("head_model", "keras_hub_model", "finetune_task", "serving"):
            value = getattr(self, field)
            if not value.startswith("xlnet_tf2.") or value.count(".") < 2:
                raise ValueError(f"task {self.name!r}: {field} is the dotted name of a class "
                                 f"or function of the package (xlnet_tf2.<module>.<name>), "
                                 f"got {value!r}.")
        if self.default_seq_len < 3:
            raise ValueError(f"task {self.name!r}: default_seq_len must be at least 3, got "
                             f"{self.default_seq_len}.")
        clashes = sorted({s.name for s in self.settings} & set(SHARED_SETTINGS))
        if clashes:
            raise ValueError(f"task {self.name!r}: settings {clashes} are task.json's shared "
                             "keys already.")


_DECLARED: Dict[str, TaskDeclaration] = {}


def register(declaration: TaskDeclaration) -> TaskDeclaration:
    """Adds `declaration` to the declared tasks and returns it. A name declared twice, or a
    setting another task declares with another type or default, raises ValueError."""
    if declaration.name in _DECLARED:
        raise ValueError(f"task {declaration.name!r} is declared twice.")
    for setting in declaration.settings:
        other = _setting(setting.name)
        if other is not None and other != setting:
            raise ValueError(f"task {declaration.name!r}: setting {setting.name!r} is "
                             f"{setting}, another task declares it {other}; task.json has one "
                             "meaning per key.")
    _DECLARED[declaration.name] = declaration
    return declaration


def _setting(name: str) -> Optional[TaskSetting]:
    return next((s for d in _DECLARED.values() for s in d.settings if s.name == name), None)


def declared(name: str) -> TaskDeclaration:
    """The declaration of task `name`; an undeclared name raises ValueError naming the
    declared ones."""
    try:
        return _DECLARED[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown task {name!r}: the declared tasks are {names()} "
                         "(xlnet_tf2/task_registry.py).") from None


def declared_tasks() -> Tuple[TaskDeclaration, ...]:
    """Every declaration, in registration order."""
    return tuple(_DECLARED.values())


def names() -> Tuple[str, ...]:
    """The declared tasks' names, in registration order."""
    return tuple(_DECLARED)


def model_classes() -> Dict[str, str]:
    """name -> module of every model class the declarations name (each task's `head_model`
    and `keras_hub_model`), in registration order."""
    found: Dict[str, str] = {}
    for declaration in _DECLARED.values():
        for dotted in (declaration.head_model, declaration.keras_hub_model):
            module, _, name = dotted.rpartition(".")
            found[name] = module
    return found


def task_settings() -> Tuple[TaskSetting, ...]:
    """Every task-specific key of task.json, once each, in registration order."""
    seen: Dict[str, TaskSetting] = {}
    for declaration in _DECLARED.values():
        for setting in declaration.settings:
            seen.setdefault(setting.name, setting)
    return tuple(seen.values())


# ---------------------------------------------------------------------------- the tasks
_PAIRED = TaskSetting("paired", bool, False, "the inputs are text pairs (a second text input)")

# Classification and regression are two kinds of one sequence head, trained by one
# ClassificationTask (xlnet-classify --kind): all they do not share is the keras-hub-style
# class and the label rule.
_SEQUENCE_HEAD = dict(
    head_model="xlnet_tf2.models.xlnet_classifier.SequenceClassifier",
    finetune_task="xlnet_tf2.tasks.classification.ClassificationTask",
    command="xlnet-classify",
    serving="xlnet_tf2.export.serving_tasks.text_signatures",
    default_seq_len=128, huggingface_architecture="XLNetForSequenceClassification",
    settings=(_PAIRED,), summary=True)

register(TaskDeclaration(
    name="classification",
    keras_hub_model="xlnet_tf2.models.xlnet_classifier.XLNetClassifier",
    min_labels=2, **_SEQUENCE_HEAD))

register(TaskDeclaration(
    name="regression",
    keras_hub_model="xlnet_tf2.models.xlnet_classifier.XLNetRegressor",
    **_SEQUENCE_HEAD))

register(TaskDeclaration(
    name="race",
    head_model="xlnet_tf2.models.xlnet_multiple_choice.MultipleChoiceModel",
    keras_hub_model="xlnet_tf2.models.xlnet_multiple_choice.XLNetMultipleChoice",
    finetune_task="xlnet_tf2.tasks.race.RaceTask",
    command="xlnet-race",
    serving="xlnet_tf2.export.serving_tasks.race_signatures",
    default_seq_len=512, huggingface_architecture="XLNetForMultipleChoice",
    settings=(TaskSetting("num_choices", int, 4, "answer options per question", positive=True),
              TaskSetting("max_qa_length", int, 128,
                          "question+option keeps its LAST max_qa_length tokens", positive=True)),
    summary=True))

register(TaskDeclaration(
    name="squad",
    head_model="xlnet_tf2.models.xlnet_question_answerer.SquadModel",
    keras_hub_model="xlnet_tf2.models.xlnet_question_answerer.XLNetQuestionAnswerer",
    finetune_task="xlnet_tf2.tasks.squad.SquadTask",
    command="xlnet-squad",
    serving="xlnet_tf2.export.serving_tasks.squad_signatures",
    default_seq_len=512, huggingface_architecture="XLNetForQuestionAnswering",
    settings=(TaskSetting("version_2_with_negative", bool, False, "SQuAD 2.0: questions may "
                          "have no answer"),
              TaskSetting("doc_stride", int, 128, "tokens between the starts of consecutive "
                          "windows"),
              TaskSetting("max_query_length", int, 64, "the question keeps its FIRST tokens"),
              TaskSetting("max_answer_length", int, 64, "longest answer span, in tokens"),
              TaskSetting("n_best_size", int, 5, "beam: top-n starts x top-n ends"),
              TaskSetting("null_score_threshold", (int, float), 0.0, "SQuAD 2.0: an "
                          "answer-class logit above it means no answer"))))

register(TaskDeclaration(
    name="token_classification",
    head_model="xlnet_tf2.models.xlnet_token_classifier.TokenClassifier",
    keras_hub_model="xlnet_tf2.models.xlnet_token_classifier.XLNetTokenClassifier",
    finetune_task="xlnet_tf2.tasks.token_classification.TokenClassificationTask",
    command="xlnet-tag",
    serving="xlnet_tf2.export.token_classification_serving.token_classification_signatures",
    default_seq_len=128, huggingface_architecture="XLNetForTokenClassification",
    min_labels=1, original_release=False, huggingface_label_tensor="classifier.weight"))
