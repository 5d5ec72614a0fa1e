"""xlnet_tf2/task_registry.py: a declaration's checks, registering, and the errors a wrong name
or a clashing setting gives (each one line naming the task)."""

import dataclasses

import pytest

from xlnet_tf2 import task_registry
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.task_registry import TaskDeclaration, TaskSetting


def _declaration(**changes):
    fields = dict(name="tagging", head_model="xlnet_tf2.models.tagging.Tagger",
                  keras_hub_model="xlnet_tf2.models.tagging.XLNetTagger",
                  finetune_task="xlnet_tf2.tasks.tagging.TaggingTask", command="xlnet-tagging",
                  serving="xlnet_tf2.export.tagging_serving.tagging_signatures",
                  default_seq_len=128, huggingface_architecture="XLNetForTokenClassification")
    return TaskDeclaration(**{**fields, **changes})


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry's declarations, restored after the test."""
    monkeypatch.setattr(task_registry, "_DECLARED", dict(task_registry._DECLARED))


def test_the_package_declares_its_five_tasks_in_order():
    assert task_registry.names() == ("classification", "regression", "race", "squad",
                                     "token_classification")
    race = task_registry.declared("race")
    assert (race.default_seq_len, race.huggingface_architecture, race.summary) == (
        512, "XLNetForMultipleChoice", True)
    assert [s.name for s in race.settings] == ["num_choices", "max_qa_length"]
    token = task_registry.declared("token_classification")
    assert (token.original_release, token.huggingface_label_tensor, token.min_labels) == (
        False, "classifier.weight", 1)
    # paired, declared by classification and regression alike, is one key of task.json.
    assert [s.name for s in task_registry.task_settings()].count("paired") == 1


def test_every_declared_model_class_is_a_public_name():
    """xlnet_tf2's names derive from the declarations: each task's model with its head and
    its keras-hub-style model are `xlnet_tf2.<Name>`, in __all__ and dir()."""
    import importlib

    import xlnet_tf2

    for declaration in task_registry.declared_tasks():
        for dotted in (declaration.head_model, declaration.keras_hub_model):
            module, _, name = dotted.rpartition(".")
            assert name in xlnet_tf2.__all__ and name in dir(xlnet_tf2), name
            assert getattr(xlnet_tf2, name) is getattr(importlib.import_module(module), name)
    assert xlnet_tf2.XLNetTokenClassifier.KIND == "token_classification"


def test_a_registered_task_adds_its_model_classes(scratch_registry):
    task_registry.register(_declaration())
    classes = task_registry.model_classes()
    assert classes["Tagger"] == classes["XLNetTagger"] == "xlnet_tf2.models.tagging"
    assert list(classes)[:2] == ["SequenceClassifier", "XLNetClassifier"]


def test_a_declaration_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        task_registry.declared("squad").default_seq_len = 384


@pytest.mark.parametrize("changes, message", [
    ({"name": "token-classification"}, "is an identifier"),
    ({"head_model": "Tagger"}, "head_model is the dotted name"),
    ({"serving": "tagging_signatures"}, "serving is the dotted name"),
    ({"default_seq_len": 2}, "default_seq_len must be at least 3"),
    ({"settings": (TaskSetting("seq_len", int, 64, "tokens"),)}, "shared keys already"),
])
def test_a_bad_declaration_is_one_line_naming_what_to_fix(changes, message):
    with pytest.raises(ValueError, match=message) as error:
        _declaration(**changes)
    assert "\n" not in str(error.value)


def test_registering_adds_a_task_to_every_name_query(scratch_registry):
    declaration = task_registry.register(_declaration(
        settings=(TaskSetting("window", int, 16, "words per window", positive=True),)))
    assert task_registry.declared("tagging") is declaration
    assert task_registry.names()[-1] == "tagging"
    assert task_registry.declared_tasks()[-1] is declaration
    assert task_registry.task_settings()[-1].name == "window"


def test_a_task_declared_twice_is_refused(scratch_registry):
    task_registry.register(_declaration())
    with pytest.raises(ValueError, match="task 'tagging' is declared twice"):
        task_registry.register(_declaration())


def test_a_setting_with_another_meaning_than_another_tasks_is_refused(scratch_registry):
    with pytest.raises(ValueError, match="setting 'num_choices'.*one meaning per key"):
        task_registry.register(_declaration(
            settings=(TaskSetting("num_choices", int, 5, "answer options"),)))
    assert "tagging" not in task_registry.names()


def test_an_undeclared_task_names_the_declared_ones():
    with pytest.raises(ValueError, match=r"unknown task 'ner'.*'token_classification'\) "
                                         r"\(xlnet_tf2/task_registry.py\)"):
        task_registry.declared("ner")


def test_an_old_task_json_of_every_key_still_reads(tmp_path):
    """A task.json written before the registry (HeadSpec's flat union, every key of every
    task with its default) reads into the derived HeadSpec with the same values."""
    import json

    from xlnet_tf2.tasks.head_spec import HeadSpec

    old = {"task": "race", "seq_len": 512, "summary_type": "last", "layout": "cls_last",
           "label_list": None, "paired": False, "lower": False, "num_choices": 4,
           "max_qa_length": 128, "version_2_with_negative": False, "doc_stride": 128,
           "max_query_length": 64, "max_answer_length": 64, "n_best_size": 5,
           "null_score_threshold": 0.0}
    (tmp_path / "task.json").write_text(json.dumps(old))
    with pytest.warns(DeprecationWarning, match="the key 'task' is now 'kind'"):
        spec = HeadSpec.read(str(tmp_path))
    renamed = {("kind" if k == "task" else k): v for k, v in old.items()}
    assert dataclasses.asdict(spec) == renamed
    # Both names saying different kinds: one line naming the file, never a guess.
    (tmp_path / "task.json").write_text(json.dumps({**old, "kind": "squad"}))
    with pytest.raises(RunConfigError, match=r"task\.json: 'task' is the old name of 'kind'"):
        HeadSpec.read(str(tmp_path))


def test_headmodel_from_pretrained_reads_any_task_directory_and_only_one(tmp_path):
    """HeadModel.from_pretrained builds the class task.json's kind declares (the one loader,
    models/pretrained.py's load); a directory without task.json is one line saying which
    class makes a new head."""
    import json

    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.models import HeadModel, MultipleChoiceModel, XLNetLMHeadModel

    config = XLNetConfig.preset("tiny")
    race = MultipleChoiceModel(config, num_choices=3).build_weights()
    race.save_pretrained(str(tmp_path / "race"))
    loaded = HeadModel.from_pretrained(str(tmp_path / "race"))
    assert type(loaded) is MultipleChoiceModel and loaded.kind == "race"
    assert loaded.num_choices == 3
    # A directory written before task.json's `task` key became `kind` loads the same.
    settings = json.loads((tmp_path / "race" / "task.json").read_text())
    assert settings["kind"] == "race" and "task" not in settings
    settings["task"] = settings.pop("kind")
    (tmp_path / "race" / "task.json").write_text(json.dumps(settings))
    with pytest.warns(DeprecationWarning, match="the key 'task' is now 'kind'"):
        old = HeadModel.from_pretrained(str(tmp_path / "race"))
    assert type(old) is MultipleChoiceModel and old.num_choices == 3
    lm = XLNetLMHeadModel(config)
    lm.build()
    lm.save_pretrained(str(tmp_path / "lm"))
    with pytest.raises(ValueError, match=r"holds no task.json; a new head .* "
                                         r"SequenceClassifier.from_pretrained") as error:
        HeadModel.from_pretrained(str(tmp_path / "lm"))
    assert "\n" not in str(error.value)
