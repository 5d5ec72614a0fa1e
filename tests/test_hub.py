"""xlnet_tf2.from_pretrained on local directories (HuggingFace, original release, converted),
hub repository ids through a stand-in for huggingface_hub (no download is ever attempted),
and the errors: no huggingface_hub, release name without a local copy, unknown names."""

import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

import xlnet_tf2
from xlnet_tf2.locate import PretrainedNotFoundError

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import hf_state_numpy, random_hf_model, run_hf  # noqa: E402
from fixtures.task_files import train_tiny_spm  # noqa: E402
from fixtures.tf1_checkpoints import original_tensors as _original_tensors  # noqa: E402
from fixtures.tf1_checkpoints import tiny_config as _config  # noqa: E402
from fixtures.tf1_checkpoints import two_stream_inputs as _inputs  # noqa: E402
from fixtures.tf1_checkpoints import write_tf1_checkpoint as _write_tf1_checkpoint  # noqa: E402

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
VOCAB = 500  # the tiny SentencePiece model's


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, spm):
    """A HuggingFace save_pretrained directory (safetensors) with its spiece.model."""
    directory = tmp_path_factory.mktemp("hf") / "xlnet-tiny"
    model = random_hf_model(_config(n_token=VOCAB), seed=31)
    model.save_pretrained(str(directory))
    shutil.copy(spm, directory / "spiece.model")
    return str(directory), model


def _max_diff(model, hf_model):
    inputs = _inputs(np.random.default_rng(0))
    return np.max(np.abs(model(inputs)["logits"].numpy() - run_hf(hf_model, inputs)["logits"]))


def test_huggingface_directory_loads_with_run_time_settings(hf_dir):
    directory, hf_model = hf_dir
    model = xlnet_tf2.from_pretrained(directory, mem_len=6, dropout=0.0)
    assert model.config.mem_len == 6 and model.config.dropout == 0.0
    assert model.config.n_layer == 2 and model.config.n_token == VOCAB
    assert _max_diff(model, hf_model) <= 1e-5
    # its backbone, and the tokenizer from the same directory
    backbone = xlnet_tf2.from_pretrained(directory).transformer
    np.testing.assert_array_equal(backbone.word_embedding.embeddings.numpy(),
                                  hf_state_numpy(hf_model)["transformer.word_embedding.weight"])
    tokenizer = xlnet_tf2.XLNetTokenizer.from_pretrained(directory)
    assert tokenizer.decode(tokenizer.encode("the value", add_special_tokens=False)) == "the value"
    with pytest.raises(ValueError, match="run-time settings only"):
        xlnet_tf2.from_pretrained(directory, n_layer=3)


def test_original_release_and_converted_directories(tmp_path, spm):
    config = _config(n_token=VOCAB)
    hf_model = random_hf_model(config, seed=32)
    release = tmp_path / "xlnet_cased_L-2_H-32_A-4"
    _write_tf1_checkpoint(_original_tensors(hf_state_numpy(hf_model), config), str(release),
                          config)
    shutil.copy(spm, release / "spiece.model")
    model = xlnet_tf2.from_pretrained(str(release))
    assert _max_diff(model, hf_model) <= 1e-5
    assert xlnet_tf2.XLNetTokenizer.from_pretrained(str(release)).vocab_size == VOCAB
    # a converted directory (what save_pretrained writes) loads as it is
    xlnet_tf2.save_pretrained(model, str(tmp_path / "converted"), spm)
    again = xlnet_tf2.from_pretrained(str(tmp_path / "converted"), mem_len=3)
    assert again.config.mem_len == 3 and _max_diff(again, hf_model) <= 1e-5
    # load_weights=False: the directory's architecture, fresh weights
    fresh = xlnet_tf2.from_pretrained(str(tmp_path / "converted"), load_weights=False)
    assert fresh.config.architecture() == model.config.architecture()
    assert _max_diff(fresh, hf_model) > 1e-2


def _fake_hub(monkeypatch, result=None, error=None):
    """A stand-in huggingface_hub module recording its calls (nothing is downloaded)."""
    calls = []

    def snapshot_download(repo_id, **kwargs):
        calls.append(dict(kwargs, repo_id=repo_id))
        if error is not None:
            raise error
        return result

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(snapshot_download=snapshot_download))
    return calls


def test_repository_ids_and_release_names_go_through_the_hub_client(monkeypatch, hf_dir):
    directory, hf_model = hf_dir
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = _fake_hub(monkeypatch, result=directory)
    model = xlnet_tf2.from_pretrained("someone/xlnet-tiny", revision="v1")
    assert _max_diff(model, hf_model) <= 1e-5
    assert calls[0]["repo_id"] == "someone/xlnet-tiny" and calls[0]["revision"] == "v1"
    assert "model.safetensors" in calls[0]["allow_patterns"]
    assert "spiece.model" in calls[0]["allow_patterns"] and not calls[0]["local_files_only"]
    assert calls[0]["etag_timeout"] <= 10
    xlnet_tf2.XLNetTokenizer.from_pretrained("xlnet-base-cased")  # the tiny stand-in's files
    assert calls[-1]["repo_id"] == "xlnet/xlnet-base-cased"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: only the local cache is asked
    xlnet_tf2.from_pretrained("someone/xlnet-tiny")
    assert calls[-1]["local_files_only"] is True


def test_hub_errors_are_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(PretrainedNotFoundError, match="pip install huggingface_hub"):
        xlnet_tf2.from_pretrained("xlnet-large-cased")
    _fake_hub(monkeypatch, error=OSError("Cannot reach https://huggingface.co: network down"))
    with pytest.raises(PretrainedNotFoundError) as info:
        xlnet_tf2.from_pretrained("someone/missing")
    assert "someone/missing could not be taken from the HuggingFace Hub" in str(info.value)
    assert "network down" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(PretrainedNotFoundError, match="not a directory, a HuggingFace Hub"):
        xlnet_tf2.from_pretrained("no such model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PretrainedNotFoundError, match="holds no model"):
        xlnet_tf2.from_pretrained(str(tmp_path / "empty"))


def test_release_names_are_architecture_presets():
    from xlnet_tf2.models.pretrained import pretrained_config

    base = pretrained_config("xlnet-base-cased", mem_len=16)
    assert base.architecture() == dict(n_layer=12, d_model=768, n_head=12, d_head=64,
                                       d_inner=3072, ff_activation="gelu_tanh", untie_r=True,
                                       n_token=32000)
    assert base.mem_len == 16
    large = pretrained_config("xlnet-large-cased")
    assert (large.n_layer, large.d_model, large.n_head, large.d_inner) == (24, 1024, 16, 4096)


@pytest.mark.slow
def test_release_name_without_local_copy_fails_fast_offline(tmp_path):
    """`from_pretrained("xlnet-base-cased")` with the real huggingface_hub, no cached copy and
    offline mode: one clear error within seconds (run in a fresh process so that the hub
    client reads this environment)."""
    script = ("import socket\n"
              "tried = []\n"  # every connection the process attempts (offline: none)
              "real_connect = socket.socket.connect\n"
              "def connect(self, address):\n"
              "    tried.append(address)\n"
              "    return real_connect(self, address)\n"
              "socket.socket.connect = connect\n"
              "import xlnet_tf2\n"
              "try:\n"
              "    xlnet_tf2.from_pretrained('xlnet-base-cased')\n"
              "except xlnet_tf2.locate.PretrainedNotFoundError as e:\n"
              "    print('ERROR', e)\n"
              "print('CONNECTIONS', tried)\n")
    env = dict(ENV, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    line = [x for x in result.stdout.splitlines() if x.startswith("ERROR")][0]
    assert "xlnet/xlnet-base-cased could not be taken from the local HuggingFace cache" in line
    assert "huggingface-cli download xlnet/xlnet-base-cased" in line
    # Within seconds: no connection is even attempted (a network wait would be one).
    assert "CONNECTIONS []" in result.stdout, result.stdout[-2000:]
