"""Restarting a run with changed settings: a setting the checkpoints depend on is an error naming
the flag and the checkpoint's value; a setting that only changes the run's course is recorded;
run_config.json keeps the settings the run was started with; stale save leftovers are cleaned;
steps.jsonl keeps each step once."""

import json
import os
import shutil

import pytest

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import Trainer

SHAPE = DataShape(seq_len=16, reuse_len=8, num_predict=4, bi_data=True)
MODEL = XLNetConfig.preset("tiny", n_token=200, d_model=32, n_head=2, d_head=16, d_inner=64)


def make(model_dir, model=MODEL, **overrides):
    batch = overrides.get("train_batch_size", 4)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                          vocab_size=200, global_batch_size=batch,
                                          input_context=context, start_step=start_step, seed=3)

    values = dict(model_dir=str(model_dir), data_dir=("synthetic",), train_batch_size=4,
                  train_steps=2, steps_per_loop=2, learning_rate=1e-3, warmup_steps=0,
                  mem_len=8, save_steps=2, log_steps=2, peak_tflops=1.0, record_steps=True)
    values.update(overrides)
    return Trainer(PretrainTask(PretrainConfig.flat(**values), architecture=model,
                                data=SyntheticPretrainData(SHAPE, 200, dataset_fn)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The model_dir of make()'s run (2 steps, a checkpoint at 2), trained once for the file."""
    model_dir = tmp_path_factory.mktemp("trained")
    make(model_dir).train()
    return model_dir


def trained_copy(trained, model_dir):
    """A copy of `trained` in `model_dir`, the run each test restarts (a run moved to another
    directory resumes: checkpoints are found by relative paths)."""
    shutil.copytree(trained, model_dir, dirs_exist_ok=True)


@pytest.mark.parametrize("change, message", [
    (dict(train_batch_size=8), "--train_batch_size: the checkpoints were trained with 4, this "
                               "run asks for 8"),
    (dict(mem_len=16), "--mem_len: the checkpoints were trained with 8, this run asks for 16"),
    (dict(precision="mixed_bfloat16"), "--precision: the checkpoints were trained with "
                                       "'float32'"),
    (dict(model=MODEL.replace(n_layer=3)), "n_layer (from --model_config): the checkpoints "
                                           "were trained with 2, this run asks for 3"),
])
def test_changed_fixed_setting_is_an_error_naming_the_flag(trained, tmp_path, change, message):
    trained_copy(trained, tmp_path)
    record = (tmp_path / "run_config.json").read_text()
    with pytest.raises(RunConfigError) as error:
        make(tmp_path, train_steps=4, **change).train()
    text = str(error.value)
    assert message in text
    assert "delete" not in text.lower() and "unreadable" not in text
    assert (tmp_path / "run_config.json").read_text() == record  # compared, not overwritten
    assert (tmp_path / "ckpt-2.index").exists()  # the healthy checkpoint is untouched


def test_changed_warn_setting_resumes_and_is_recorded(trained, tmp_path, capsys):
    trained_copy(trained, tmp_path)
    record = json.loads((tmp_path / "run_config.json").read_text())
    result = make(tmp_path, train_steps=4, learning_rate=5e-4).train()
    assert result.start_step == 2 and result.final_step == 4
    assert "--learning_rate: the run was started with 0.001, now 0.0005" in capsys.readouterr().out
    assert json.loads((tmp_path / "run_config.json").read_text()) == record
    attempts = [json.loads(line) for line in open(tmp_path / "attempts.jsonl")]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert attempts[1]["start_step"] == 2
    # --train_steps changed too (the schedule decays to zero there): also recorded.
    assert attempts[1]["changed_settings"] == {"learning_rate": {"was": 1e-3, "now": 5e-4},
                                               "train_steps": {"was": 2, "now": 4}}
    steps = [json.loads(line) for line in open(tmp_path / "steps.jsonl")]
    assert [(s["step"], s["attempt"]) for s in steps] == [(1, 1), (2, 1), (3, 2), (4, 2)]


def test_stale_save_leftovers_and_lines_of_a_dead_attempt_are_dropped(trained, tmp_path):
    trained_copy(trained, tmp_path)
    # What a crash leaves: a half-written save and step lines past the last checkpoint.
    (tmp_path / "ckpt-4_temp").mkdir()
    (tmp_path / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    with open(tmp_path / "steps.jsonl", "a") as f:
        f.write(json.dumps({"step": 3, "loss": 1.0, "attempt": 1}) + "\n")
        f.write('{"step": 4, "lo')  # cut short by the kill
    make(tmp_path, train_steps=4).train()
    assert not (tmp_path / "ckpt-4_temp").exists()
    steps = [json.loads(line) for line in open(tmp_path / "steps.jsonl")]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert steps[2]["attempt"] == 2 and steps[2]["loss"] != 1.0


def test_a_checkpoint_that_does_not_fit_is_not_called_broken(trained, tmp_path):
    """An older model_dir without run_config.json: the mismatch surfaces at restore, as a
    mismatch, not as corrupt files to delete."""
    trained_copy(trained, tmp_path)
    os.remove(tmp_path / "run_config.json")
    with pytest.raises(Exception) as error:
        make(tmp_path, model=MODEL.replace(d_inner=96), train_steps=4).train()
    text = str(error.value)
    assert "does not fit this run's model" in text and "delete" not in text.lower()
