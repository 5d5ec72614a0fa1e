"""Fine-tuning from a TensorFlow Datasets dataset (`--tfds_name`): a small classification
dataset built from the TSV files of the file-input tests into a temporary data_dir
(fixtures/tfds_datasets.py, no network) gives the examples, the label set and the trained
model that the same TSV files give."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from xlnet_tf2.tasks import text_readers
from xlnet_tf2.tasks.classification import eval_examples, load_examples
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.finetune_config import ClassificationConfig

from fixtures import tfds_datasets
from fixtures.paths import REPO_ROOT as REPO
from fixtures.tfds_datasets import DOCUMENTS, TOPIC_NAMES, TOPICS


@pytest.fixture(scope="module")
def data():
    return tfds_datasets.prepared()


def _content(examples):
    return [(e.text_a, e.text_b, e.label) for e in examples]


def test_reader_yields_the_rows_of_the_file(data):
    for split, path in (("train", data["train_tsv"]), ("dev", data["dev_tsv"])):
        rows = text_readers.read_text_file(path, "sentence", None, "topic", False)
        examples, names = text_readers.read_tfds(TOPICS, split, "sentence", None, "topic",
                                                 False, data["data_dir"])
        assert names == list(TOPIC_NAMES)
        assert _content(examples) == _content(rows) and len(rows) > 15
        assert {e.label for e in examples} == set(TOPIC_NAMES)
        assert [e.guid for e in examples[:2]] == [f"tfds:{TOPICS}[{split}]:0",
                                                  f"tfds:{TOPICS}[{split}]:1"]
    # A sub-split reads its slice of the records.
    part, _ = text_readers.read_tfds(TOPICS, "train[5:8]", "sentence", None, "topic", False,
                                     data["data_dir"])
    rows = text_readers.read_text_file(data["train_tsv"], "sentence", None, "topic", False)
    assert _content(part) == _content(rows[5:8])


def test_run_settings_read_the_same_examples_as_from_files(data, tmp_path):
    common = dict(model_dir=str(tmp_path / "run"), text_a_column="sentence",
                  label_column="topic")
    tfds_config = ClassificationConfig.flat(
        tfds_name=TOPICS, tfds_train_split="train", tfds_eval_split="dev",
        tfds_data_dir=data["data_dir"], **common)
    files_config = ClassificationConfig.flat(
        train_file=data["train_tsv"], eval_file=data["dev_tsv"], **common)
    train, labels, train_source = load_examples(tfds_config)
    evaluation, eval_source = eval_examples(tfds_config, regression=False)
    assert _content(train) == _content(load_examples(files_config)[0])
    assert _content(evaluation) == _content(eval_examples(files_config, False)[0])
    assert labels == load_examples(files_config)[1] == list(TOPIC_NAMES)
    assert (train_source, eval_source) == (f"tfds:{TOPICS}[train]", f"tfds:{TOPICS}[dev]")


def _error(*args, data_dir):
    with pytest.raises(TaskDataError) as e:
        text_readers.read_tfds(*args, data_dir=data_dir)
    message = str(e.value)
    assert "\n" not in message, message  # one line, never TFDS's list of every dataset
    return message


def test_bad_tfds_inputs_name_the_dataset_and_flag(data):
    d = data["data_dir"]
    message = _error("xlnet_no_such_dataset", "train", "sentence", None, "topic", data_dir=d)
    assert message.startswith(
        f"tfds:xlnet_no_such_dataset[train]: could not be loaded from --tfds_data_dir={d} "
        "(DatasetNotFoundError: Dataset xlnet_no_such_dataset not found.")
    assert message.endswith("pass its data directory as --tfds_data_dir.")
    assert "Unknown split 'test'" in _error(TOPICS, "test", "sentence", None, "topic",
                                            data_dir=d)
    assert _error(TOPICS, "train", "text", None, "topic", data_dir=d) == (
        f"tfds:{TOPICS}[train]: has no column 'text' (columns: ['sentence', 'topic']); fix "
        "--text_a_column.")
    assert _error(TOPICS, "train", "sentence", None, "label", data_dir=d).endswith(
        "has no column 'label' (columns: ['sentence', 'topic']); fix --label_column.")
    assert _error(TOPICS, "train", "sentence", "sentence2", "topic", data_dir=d).endswith(
        "fix --text_b_column.")
    # A dataset of one's own needs the column flags; a text label has no class names.
    assert "give --text_a_column and --label_column" in _error(TOPICS, "train", data_dir=d)
    assert _error(DOCUMENTS, "train", "text", None, "text", data_dir=d).endswith(
        "column 'text' has no class names; use --kind=regression for a numeric label.")


def _run_classifier(model_dir, spm, *inputs):
    run = subprocess.run(
        [sys.executable, os.path.join(REPO, "experiments/run_classifier.py"),
         f"--model_dir={model_dir}", f"--spm_model={spm}", "--model_config=tiny",
         "--text_a_column=sentence", "--label_column=topic", "--seq_len=32",
         "--train_steps=8", "--train_batch_size=8", "--learning_rate=1e-3", "--warmup_steps=2",
         "--eval_every=4", "--log_steps=4", "--dropout=0", "--dropatt=0", "--deterministic",
         f"--feature_cache_dir={model_dir}-features", *inputs],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert run.returncode == 0, run.stderr[-3000:]
    with open(os.path.join(model_dir, "eval_results.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_run_classifier_trains_on_the_dataset_as_on_the_files(data, tmp_path):
    import tensorflow as tf

    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path), vocab_size=300)
    # The command never imports fixtures/tfds_datasets.py: TFDS finds the prepared dataset
    # in --tfds_data_dir from its dataset_info.json.
    from_tfds = _run_classifier(tmp_path / "tfds", spm, f"--tfds_name={TOPICS}",
                                "--tfds_eval_split=dev", f"--tfds_data_dir={data['data_dir']}")
    from_files = _run_classifier(tmp_path / "files", spm, f"--train_file={data['train_tsv']}",
                                 f"--eval_file={data['dev_tsv']}")
    assert [e["step"] for e in from_tfds] == [4, 8]
    assert from_tfds == from_files  # the same examples, batches and steps: the same numbers
    assert all(0.0 <= e["accuracy"] <= 1.0 for e in from_tfds)
    with open(tmp_path / "tfds" / "task.json") as f:
        assert json.load(f)["label_list"] == list(TOPIC_NAMES)
    # The trained weights and optimizer slots, bit for bit.
    tfds_dir, files_dir = str(tmp_path / "tfds"), str(tmp_path / "files")
    names = [n for n, _ in tf.train.list_variables(tfds_dir)
             if n != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert names == [n for n, _ in tf.train.list_variables(files_dir)
                     if n != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert len(names) > 50 and tf.train.load_variable(tfds_dir, "global_step/.ATTRIBUTES/"
                                                      "VARIABLE_VALUE") == 8
    for name in names:
        np.testing.assert_array_equal(tf.train.load_variable(tfds_dir, name),
                                      tf.train.load_variable(files_dir, name), err_msg=name)
