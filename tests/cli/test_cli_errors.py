"""Bad input on the command line: one line naming the file, record or flag, exit status 2,
no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fixtures.paths import REPO_ROOT as ROOT

pytestmark = pytest.mark.slow  # every test runs a command in a Python subprocess

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _fails_with_one_line(args, *expected):
    proc = subprocess.run([sys.executable] + args, cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


@pytest.fixture()
def classification_files(tmp_path):
    spm = tmp_path / "sp.model"
    spm.write_bytes(b"only its existence is checked before the data is read")
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\nfine\tpos\nalso fine\tneg\n", encoding="utf-8")
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nfine\tpos\nmissing its label\n", encoding="utf-8")
    return dict(spm=str(spm), train=str(train), bad=str(bad), dir=tmp_path)


def test_finetuning_reader_error_is_one_line(classification_files):
    f = classification_files
    _fails_with_one_line(
        ["experiments/run_classifier.py", f"--model_dir={f['dir']}/run", "--model_config=tiny",
         f"--spm_model={f['spm']}", f"--train_file={f['bad']}", f"--eval_file={f['train']}",
         "--text_a_column=sentence", "--label_column=label"],
        f["bad"], "line 3", "has 1 fields")


def test_finetuning_from_a_directory_without_a_model_names_the_flag(classification_files):
    f = classification_files
    empty = f["dir"] / "not_a_model"
    empty.mkdir()
    _fails_with_one_line(
        ["experiments/run_classifier.py", f"--model_dir={f['dir']}/run",
         f"--init_checkpoint={empty}", f"--train_file={f['train']}",
         "--text_a_column=sentence", "--label_column=label"],
        f"--init_checkpoint='{empty}'", "holds no model", "xlnet_config.json")


def test_export_of_a_missing_model_dir(tmp_path):
    _fails_with_one_line(
        ["experiments/export_saved_model.py", f"--model_dir={tmp_path}/nothing",
         "--kind=features", f"--export_dir={tmp_path}/export"],
        "--model_dir=", "does not exist")


def test_extraction_of_invalid_utf8(tmp_path):
    import xlnet_tf2

    model_dir = tmp_path / "model"
    model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=50))
    model.build()
    xlnet_tf2.save_pretrained(model, str(model_dir))
    (model_dir / "spiece.model").write_bytes(b"not read before the input is")
    texts = tmp_path / "texts.txt"
    texts.write_bytes(b"first line\nsecond \xff\xfe line\n")
    _fails_with_one_line(
        ["experiments/extract_features.py", f"--model_dir={model_dir}",
         f"--input_file={texts}", f"--output_file={tmp_path}/out.npz"],
        str(texts), "line 2", "not valid UTF-8")
