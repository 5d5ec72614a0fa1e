"""xlnet-export's kind is the model_dir's task.json's: --kind may be left out, and given it is
only checked (one line on a mismatch), or picks the backbone's features."""

import pytest

from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.export.export_config import ExportConfig
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.finetuned_model import FeatureSpec, load_task_model

from fixtures.task_files import train_tiny_spm
from fixtures.tf1_checkpoints import tiny_config


@pytest.fixture(scope="module")
def regression_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("regression")
    spm = train_tiny_spm(str(root))
    model = SequenceClassifier(tiny_config(n_token=500), 1).build_weights()
    model.save_pretrained(str(root / "model"), spm, seq_len=32)
    return str(root / "model")


def test_the_kind_is_read_from_task_json(regression_dir):
    config = ExportConfig(model_dir=regression_dir, export_dir="exports")  # no --kind
    assert config.kind is None
    model, spec, _ = load_task_model(config.model_dir, config.kind)
    assert (spec.kind, spec.seq_len, type(model).__name__) == ("regression", 32,
                                                                "SequenceClassifier")
    _, spec, _ = load_task_model(regression_dir, "regression")  # given: checked, the same
    assert spec.kind == "regression"
    backbone, spec, _ = load_task_model(regression_dir, "features")
    assert isinstance(spec, FeatureSpec) and type(backbone).__name__ == "XLNetModel"


def test_a_kind_that_is_not_task_jsons_is_one_line(regression_dir, tmp_path):
    with pytest.raises(RunConfigError) as error:
        load_task_model(regression_dir, "classification")
    assert str(error.value) == (f"--kind=classification but {regression_dir}/task.json says "
                                "'regression'; leave --kind out (or pass --kind=features).")
    converted = tmp_path / "converted"  # a backbone's directory: no task.json, no kind
    SequenceClassifier(tiny_config(n_token=500), 1).build_weights().transformer \
        .save_pretrained(str(converted), f"{regression_dir}/spiece.model")
    with pytest.raises(RunConfigError, match=r"converted/task.json does not exist: the "
                       r"directory holds no fine-tuned model .*with --kind=features"):
        load_task_model(str(converted))
    with pytest.raises(RunConfigError, match=r"^--seq_len is for --kind=features only"):
        ExportConfig(model_dir=regression_dir, export_dir="exports", seq_len=64)
