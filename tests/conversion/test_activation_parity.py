"""The feed-forward activation as HuggingFace computes it, both ways: its "gelu" (the exact erf
GELU, transformers' default) converts to our "gelu_erf" and its "gelu_new" (the tanh form) to
our "gelu_tanh", the original XLNet's, which the original's xlnet_config.json calls "gelu";
each gives HuggingFace's logits to 1e-5 and writes back under HuggingFace's own name. Nothing
is printed or warned on the way (the approximation note, once printed twice, is gone with the
approximation).

The model is 96 wide with weights drawn at std 0.1: there the erf and tanh forms' logits
differ by 7.6e-4 (measured on HuggingFace's side) and ours meet HuggingFace's to 2.4e-6, so a
model computing the other form fails by far. (At std 0.3 the logits reach 11 and float32
alone leaves 3e-5 between the two implementations.)"""

import json
import warnings

import numpy as np
import pytest

import xlnet_tf2
from benchmarks.tools.hf_reference import hf_config, run_hf
from fixtures.tf1_checkpoints import original_tensors, write_tf1_checkpoint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONFIG = xlnet_tf2.XLNetConfig(n_layer=2, d_model=96, n_head=4, d_head=24, d_inner=192,
                               n_token=120, dropout=0.0, dropatt=0.0)
IDS = np.random.default_rng(0).integers(0, 120, size=(3, 24)).astype(np.int32)


def _hf_model(ff_activation):
    """A transformers XLNetLMHeadModel with `ff_activation` and weights drawn at std 0.1."""
    config = hf_config(CONFIG)
    config.ff_activation = ff_activation
    torch.manual_seed(7)
    model = transformers.XLNetLMHeadModel(config).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator) * 0.1
            param.copy_(1.0 + noise if name.endswith("layer_norm.weight") else noise)
    return model


def test_the_two_forms_differ_where_this_test_looks():
    erf, tanh = (run_hf(_hf_model(name), {"input_ids": IDS})["logits"]
                 for name in ("gelu", "gelu_new"))
    assert np.abs(erf - tanh).max() > 5e-4


@pytest.mark.parametrize("hf_name, ours", [("gelu", "gelu_erf"), ("gelu_new", "gelu_tanh")])
def test_huggingface_activation_converts_both_ways_at_parity(hf_name, ours, tmp_path, capsys):
    hf_model = _hf_model(hf_name)
    hf_model.save_pretrained(str(tmp_path / "hf"))
    expected = run_hf(hf_model, {"input_ids": IDS})["logits"]
    capsys.readouterr()  # transformers' own progress bar while saving
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no approximation warning any more
        model = xlnet_tf2.from_pretrained(str(tmp_path / "hf"))
    assert capsys.readouterr().err == ""
    assert model.config.ff_activation == ours
    from xlnet_tf2.models.directories import convert_checkpoint  # xlnet-convert's job

    report = convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert not [note for note in report["notes"] if "gelu" in note.lower()], report["notes"]
    assert json.loads((tmp_path / "ours" / "xlnet_config.json").read_text())[
        "ff_activation"] == ours
    np.testing.assert_allclose(model({"input_ids": IDS})["logits"].numpy(), expected,
                               atol=1e-5, rtol=0)
    # ... and back: HuggingFace's own name in config.json, HuggingFace's logits again.
    model.save_pretrained(str(tmp_path / "back"), format="huggingface")
    written = json.loads((tmp_path / "back" / "config.json").read_text())
    assert written["ff_activation"] == hf_name
    again = transformers.XLNetLMHeadModel.from_pretrained(str(tmp_path / "back")).eval()
    np.testing.assert_allclose(run_hf(again, {"input_ids": IDS})["logits"], expected,
                               atol=1e-5, rtol=0)


def test_the_originals_gelu_is_the_tanh_form_and_writes_as_gelu_new(tmp_path):
    """An original release's xlnet_config.json says "gelu" and means the tanh form: it reads
    as "gelu_tanh" (our configs say which form), computes HuggingFace's "gelu_new" and
    converts to it."""
    hf_model = _hf_model("gelu_new")
    state = {k: v.numpy() for k, v in hf_model.state_dict().items()}
    config = CONFIG.replace(ff_activation="gelu")
    assert config.ff_activation == "gelu_tanh" and CONFIG.ff_activation == "gelu_tanh"
    write_tf1_checkpoint(original_tensors(state, config), str(tmp_path / "release"), config)
    path = tmp_path / "release" / "xlnet_config.json"  # the original's spelling, as it ships
    path.write_text(json.dumps({**json.loads(path.read_text()), "ff_activation": "gelu"}))
    model = xlnet_tf2.from_pretrained(str(tmp_path / "release"))
    assert model.config.ff_activation == "gelu_tanh"
    np.testing.assert_allclose(model({"input_ids": IDS})["logits"].numpy(),
                               run_hf(hf_model, {"input_ids": IDS})["logits"], atol=1e-5, rtol=0)
    model.save_pretrained(str(tmp_path / "hf"), format="huggingface")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["ff_activation"] == \
        "gelu_new"


def test_an_activation_without_counterpart_is_one_line(tmp_path):
    hf_model = _hf_model("gelu_new")
    hf_model.config.ff_activation = "swish"
    hf_model.save_pretrained(str(tmp_path / "hf"))
    with pytest.raises(ValueError) as error:
        xlnet_tf2.from_pretrained(str(tmp_path / "hf"))
    assert str(error.value) == (f"{tmp_path / 'hf'}/config.json: ff_activation 'swish' has no "
                                "counterpart here (known: ['gelu', 'gelu_new', "
                                "'gelu_pytorch_tanh', 'relu']).")
    with pytest.raises(xlnet_tf2.ConfigError, match=r"ff_activation must be one of \('gelu_tanh', "
                       r"'gelu_erf', 'relu'\) \(or the original's \"gelu\", read as "
                       r"\"gelu_tanh\"\), got 'gelu_new'"):
        CONFIG.replace(ff_activation="gelu_new")
